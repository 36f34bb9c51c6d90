package io.sparkcomms.collectives.rendezvous;

import io.sparkcomms.collectives.FileStat;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.regex.Pattern;

/**
 * Where two ranks of a communicator meet to build their point-to-point channel, without a collective
 * of the whole communicator: a directory {@code base/sparkcomms-p2p-H}, H a digest of an ID and the
 * pair LO, HI ({@link #of}), which the lower rank
 * of the pair creates (mode 0700) when it first needs the channel and the higher rank waits for. Rank 0
 * draws the ID (128 random bits) and names the base when the communicator is created (the host
 * backend: the segment's directory, which every rank maps from; the GPU backend: rank 0's temporary
 * directory), and every rank takes both from rank 0's creation message; no process outside the group
 * knows the ID, so none can plant the directory ahead of the pair (and a directory that exists before
 * the lower rank creates it is refused). The text from rank 0 is untrusted: {@link #decode} checks its
 * form, and {@link #baseProblem} that the base is a directory of this user or a sticky one such as
 * {@code /tmp}, so that no other user can swap the pair's directory for one of theirs.
 */
public final class PairDirectory {
  private static final String PREFIX = "p2p ";
  private static final Pattern ID = Pattern.compile("[0-9a-f]{32}");
  /** Longest text {@link #decode} accepts. */
  public static final int MAX_TEXT = 1024;

  private final String id;
  private final Path base;

  private PairDirectory(String id, Path base) {
    this.id = id;
    this.base = base;
  }

  /** A fresh ID under this process's temporary directory (rank 0, at creation). */
  public static PairDirectory fresh() { return fresh(Paths.get(System.getProperty("java.io.tmpdir"))); }

  /** A fresh ID under {@code base} (rank 0, at creation: a directory every rank of the group can reach). */
  public static PairDirectory fresh(Path base) {
    byte[] b = new byte[16];
    new SecureRandom().nextBytes(b);
    Path real;
    try {
      real = base.toRealPath();  // a base reached through a link (/dev/shm -> /run/shm) is named by its target
    } catch (IOException e) {
      real = base.toAbsolutePath().normalize();  // baseProblem says why when a channel is built
    }
    return new PairDirectory(HexFormat.of().formatHex(b), real);
  }

  /** One line of text: "p2p ID BASE". */
  public String encode() { return PREFIX + id + " " + base; }

  /** Rank 0's text, checked; {@link IllegalArgumentException} naming what is wrong. */
  public static PairDirectory decode(String text) {
    if (text == null || text.length() > MAX_TEXT) throw new IllegalArgumentException("point-to-point directory text missing or longer than " + MAX_TEXT);
    if (!text.startsWith(PREFIX) || text.length() < PREFIX.length() + 34) throw new IllegalArgumentException("no point-to-point directory text");
    String id = text.substring(PREFIX.length(), PREFIX.length() + 32);
    if (!ID.matcher(id).matches() || text.charAt(PREFIX.length() + 32) != ' ') throw new IllegalArgumentException("bad point-to-point id");
    String path = text.substring(PREFIX.length() + 33);
    if (path.indexOf('\0') >= 0 || path.indexOf('\n') >= 0) throw new IllegalArgumentException("bad point-to-point base directory");
    Path base = Paths.get(path);
    if (!base.isAbsolute() || !base.normalize().equals(base)) throw new IllegalArgumentException("point-to-point base directory is not an absolute, normal path");
    return new PairDirectory(id, base);
  }

  /**
   * The directory of the pair {@code lo < hi}: its name is a digest of the ID and the pair, so one
   * pair's name (visible to anyone who can list the base) tells nothing of the other pairs' names.
   */
  public Path of(int lo, int hi) {
    if (lo < 0 || hi <= lo) throw new IllegalArgumentException("pair " + lo + ", " + hi);
    try {
      byte[] d = java.security.MessageDigest.getInstance("SHA-256")
          .digest((id + ":" + lo + ":" + hi).getBytes(java.nio.charset.StandardCharsets.UTF_8));
      return base.resolve("sparkcomms-p2p-" + HexFormat.of().formatHex(d, 0, 16));
    } catch (java.security.NoSuchAlgorithmException e) {
      throw new IllegalStateException("SHA-256 is missing from this Java runtime", e);
    }
  }

  /** Why the base directory may not hold pair directories (completing "the base ... is refused: "), or null. */
  public String baseProblem() {
    FileStat d;
    try {
      d = FileStat.of(base);
    } catch (IOException e) {
      return "it cannot be checked: " + e;
    }
    if (!d.isDirectory()) return "it is a " + d.type() + ", not a directory";
    if ((d.permissions() & 0022) != 0 && !d.sticky()) return "other users can write it (mode " + d.permissionText() + ") and it is not sticky";
    if (!d.ownedByMe() && d.uid() != 0) return "it is owned by uid " + d.uid() + ", neither this user nor root";
    return null;
  }

  /** The lower rank: creates the pair's directory (mode 0700); one that already exists is refused. */
  public Path create(int lo, int hi) throws IOException {
    String why = baseProblem();
    if (why != null) throw new IOException("the point-to-point base directory " + base + " is refused: " + why);
    Path dir = of(lo, hi);
    try {
      return Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    } catch (FileAlreadyExistsException e) {
      throw new IOException(dir + " exists already: only the pair's lower rank creates it, once; refusing a directory made by another process", e);
    }
  }

  /** Whether the pair's directory exists (the higher rank's poll; {@link FileRendezvous} checks it before use). */
  public boolean exists(int lo, int hi) { return Files.isDirectory(of(lo, hi), LinkOption.NOFOLLOW_LINKS); }

  @Override public String toString() { return base + "/sparkcomms-p2p-..."; }
}
