package io.sparkcomms.collectives.host;

import static io.sparkcomms.collectives.host.ShmSegment.CREATOR_NS;
import static io.sparkcomms.collectives.host.ShmSegment.CREATOR_PID;
import static io.sparkcomms.collectives.host.ShmSegment.CREATOR_START;

import io.sparkcomms.collectives.FileStat;
import io.sparkcomms.collectives.liveness.ProcessId;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.regex.Pattern;

/**
 * The segment files of the host backend in their directory (/dev/shm): their names, what a file must
 * be before a rank maps it, and the removal of stale ones.
 *
 * <p>Every file in that directory may have been planted by another local user, so nothing here opens a
 * path before its lstat(2) shows a regular file of this user with mode 0600 and exactly one name, and
 * nothing follows a symbolic link. Java cannot fstat(2) an open channel, so after opening, the path is
 * checked again to still name the same inode; a swap back and forth between those two looks goes
 * unseen, and in a sticky directory such as /dev/shm only this user (or root) can rename or remove
 * this user's files, so only a process inside this user's trust domain can make one (docs/security.md).
 */
final class ShmFiles {
  private ShmFiles() {}

  static final String PREFIX = "sparkcomms-";
  /** A segment's name: the prefix and 128 random bits in lower-case hex. */
  private static final Pattern NAME = Pattern.compile("sparkcomms-[0-9a-f]{32}");
  /** The only mode a segment file has (owner read and write). */
  static final int MODE = 0600;

  /** Where segments live: /dev/shm when present, else the temp directory. */
  static Path baseDirectory() {
    Path shm = Paths.get("/dev/shm");
    return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Paths.get(System.getProperty("java.io.tmpdir"));
  }

  /** A fresh segment path in {@code dir}: the prefix and 128 bits from SecureRandom, never guessed by another process. */
  static Path newSegmentPath(Path dir) {
    byte[] token = new byte[16];
    new SecureRandom().nextBytes(token);
    return dir.resolve(PREFIX + HexFormat.of().formatHex(token));
  }

  static boolean isSegmentName(String name) { return NAME.matcher(name).matches(); }

  /**
   * Why {@code dir} cannot hold segments, or null: it must be a directory owned by root or this user,
   * and one that others can write must be sticky, so that they cannot rename or remove this user's
   * files in it. The directory is this process's choice ({@link #baseDirectory}), not a peer's, so a
   * symbolic link to it (/dev/shm on some systems) is followed and its target checked.
   */
  static String directoryProblem(Path dir) {
    FileStat d;
    try {
      d = FileStat.of(dir.toRealPath());
    } catch (IOException e) {
      return "cannot read its attributes: " + e;
    }
    if (!d.isDirectory()) return "it is a " + d.type() + ", not a directory";
    if (d.uid() != 0 && !d.ownedByMe()) return "it is owned by uid " + d.uid() + ", neither root nor this process's uid " + FileStat.currentUid();
    if ((d.permissions() & 0022) != 0 && !d.sticky()) {
      return "others can write it (mode " + d.permissionText() + ") and it is not sticky, so they could replace the segment";
    }
    return null;
  }

  /**
   * Why {@code st} is not a segment file this user may map, or null: a regular file owned by this
   * user, mode 0600, one name.
   */
  static String fileProblem(FileStat st) {
    if (!st.isRegularFile()) return "it is a " + st.type() + ", not a regular file";
    if (!st.ownedByMe()) return "it is owned by uid " + st.uid() + ", not by this process's uid " + FileStat.currentUid();
    if (st.permissions() != MODE) return "it has mode " + st.permissionText() + ", not rw------- (0600)";
    if (st.links() != 1) return "it has " + st.links() + " names (hard links), a segment has one";
    return null;
  }

  /**
   * Opens, read-write, the segment that rank 0 named in its rendezvous message, after checking that it is
   * one: {@code p} must be {@code dir}/sparkcomms-&lt;32 hex&gt; ({@code dir} as this rank computes it),
   * {@code dir} a directory fit for segments ({@link #directoryProblem}), the file a regular file of
   * this user with mode 0600, one name and {@code size} bytes, and still the same inode once opened.
   * Raises {@link IllegalStateException} naming the path and the reason otherwise, or the
   * {@link IOException} of the open itself.
   */
  static FileChannel openPeerSegment(Path dir, Path p, long size) throws IOException {
    String why = pathProblem(dir, p);
    if (why == null) why = directoryProblem(dir);
    if (why != null) throw refused(p, why);
    FileStat before = FileStat.of(p);
    why = fileProblem(before);
    if (why != null) throw refused(p, why);
    FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS);
    try {
      FileStat after = FileStat.of(p);
      if (!after.sameFile(before)) why = "it was replaced by another file while being opened";
      else if (ch.size() != size) {
        why = "it has " + ch.size() + " bytes, expected " + size + ": do all ranks use the same rank count and staging size?";
      }
      if (why != null) throw refused(p, why);
      return ch;
    } catch (IOException | RuntimeException | Error e) {
      ch.close();
      throw e;
    }
  }

  /** Why {@code p} is not the name of a segment in {@code dir}, or null. Only looks at the path. */
  private static String pathProblem(Path dir, Path p) {
    Path parent = p.toAbsolutePath().normalize().getParent();
    if (parent == null || !parent.equals(dir.toAbsolutePath().normalize())) return "it is not in " + dir;
    String name = p.getFileName().toString();
    if (!isSegmentName(name)) return "its name '" + name + "' is not sparkcomms- and 32 lower-case hex digits";
    return null;
  }

  private static IllegalStateException refused(Path p, String why) {
    return new IllegalStateException("refusing to map the shared-memory segment " + p + " that rank 0 named: " + why);
  }

  // ------------------------------------------------------------------ stale files

  /** A segment file without its creator record this old was left by a creator killed right after creating it. */
  static final long UNATTRIBUTED_STALE_MILLIS = 5_000;

  /**
   * The most directory entries one sweep examines. Each costs a few system calls; a directory flooded
   * with planted names therefore costs a sweep at most this many, and since the examined entries are a
   * random sample of the matching names, this user's stale files are still found over later sweeps.
   */
  static final int MAX_SWEEP_ENTRIES = 256;

  /** The most names one sweep reads from the directory to sample from. */
  static final int MAX_SWEEP_LISTED = 1 << 16;

  /** What one sweep did: directory entries it examined, files it removed. */
  record Sweep(int examined, int removed) {}

  /**
   * Removes segment files whose creator process is gone. A segment's name exists only from its creation
   * until every rank has mapped it, so a file left behind means its creator was killed in that window.
   * The creator's pid, start time and PID namespace are the first bytes written to a new file; a file
   * without them (creator killed microseconds after creating it) counts as stale once
   * {@link #UNATTRIBUTED_STALE_MILLIS} old. A creator of another PID namespace sharing this /dev/shm is
   * never judged (its pid means nothing here): its file is left, rather than a live job's removed.
   *
   * <p>Only names of the segment form are considered, at most {@link #MAX_SWEEP_ENTRIES} of them (a
   * random sample), and of those only regular files of this user with mode 0600 and one name are opened
   * ({@link #fileProblem}); anything else (a FIFO, whose open would block, a symbolic link, another
   * user's file) is left alone unopened. Best effort; runs off the creation path ({@link StaleSweeper}).
   */
  static Sweep sweepStale(Path dir) {
    int removed = 0;
    List<Path> sample = sample(dir);
    for (Path p : sample) {
      try {
        FileStat st = FileStat.of(p);
        if (fileProblem(st) != null || !isStale(p, st)) continue;
        FileStat now = FileStat.of(p);
        if (now.sameFile(st) && Files.deleteIfExists(p)) removed++;
      } catch (IOException | RuntimeException e) {
        // gone meanwhile, or we may not
      }
    }
    return new Sweep(sample.size(), removed);
  }

  /** Up to {@link #MAX_SWEEP_ENTRIES} segment names of {@code dir}, drawn uniformly from the first {@link #MAX_SWEEP_LISTED}. */
  private static List<Path> sample(Path dir) {
    List<Path> kept = new ArrayList<>();
    int seen = 0;
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, PREFIX + "*")) {
      for (Path p : ds) {
        if (!isSegmentName(p.getFileName().toString())) continue;
        if (++seen > MAX_SWEEP_LISTED) break;
        if (kept.size() < MAX_SWEEP_ENTRIES) {
          kept.add(p);
        } else {
          int j = ThreadLocalRandom.current().nextInt(seen);  // reservoir sampling
          if (j < MAX_SWEEP_ENTRIES) kept.set(j, p);
        }
      }
    } catch (IOException | RuntimeException e) {
      // best effort: what was listed so far
    }
    return kept;
  }

  /**
   * Whether {@code p}, whose lstat was {@code st}, is a segment whose creator process no longer exists
   * (or its pid was reused). Opened read-write: on Linux opening a FIFO read-write never blocks, so a
   * file swapped for one after the lstat cannot hang the sweep; the path must still name the inode of
   * {@code st} once opened.
   */
  private static boolean isStale(Path p, FileStat st) {
    ByteBuffer h = ByteBuffer.allocate(CREATOR_NS + 8).order(ByteOrder.nativeOrder());
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS)) {
      if (!FileStat.of(p).sameFile(st)) return false;
      while (h.hasRemaining() && ch.read(h) > 0) {
        // read the creator record
      }
    } catch (IOException | SecurityException e) {
      return false; // gone, or not ours
    }
    long ageMillis = System.currentTimeMillis() - st.modifiedMillis();
    long pid = h.position() == h.capacity() ? h.getLong(CREATOR_PID) : 0;
    if (pid <= 0) return ageMillis > UNATTRIBUTED_STALE_MILLIS;
    long start = h.getLong(CREATOR_START), ns = h.getLong(CREATOR_NS);  // 0: unknown
    // exited, a zombie, or its pid reused; never "gone" while this process cannot read /proc, nor
    // when the creator lives in another PID namespace
    return new ProcessId(pid, start == 0 ? -1 : start, ns == 0 ? -1 : ns).gone(ProcessId.START_TOLERANCE_MILLIS);
  }
}
