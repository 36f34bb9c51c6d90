package io.sparkcomms.collectives;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.Map;

/**
 * What lstat(2) says of a path, from one call that never follows a symbolic link and never opens the
 * file (so a FIFO or a device there cannot block or act): its type, owner, mode, link count, size and
 * identity (device and inode). For the checks of files that another process may have planted.
 *
 * @param mode the st_mode bits: file type and permissions
 */
public record FileStat(long device, long inode, int mode, int uid, int links, long size, long modifiedMillis) {
  private static final int S_IFMT = 0170000;
  private static final int S_IFREG = 0100000;
  private static final int S_IFDIR = 0040000;
  private static final int S_IFLNK = 0120000;
  private static final int S_ISVTX = 01000;

  private static final int MY_UID = readUid();

  /** The attributes of {@code p} itself (a symbolic link is reported as one). */
  public static FileStat of(Path p) throws IOException {
    Map<String, Object> a;
    try {
      a = Files.readAttributes(p, "unix:dev,ino,mode,uid,nlink,size,lastModifiedTime", LinkOption.NOFOLLOW_LINKS);
    } catch (UnsupportedOperationException | IllegalArgumentException e) {
      throw new IOException("cannot read the owner and mode of " + p + " on this platform: " + e.getMessage(), e);
    }
    return new FileStat((long) a.get("dev"), (long) a.get("ino"), (int) a.get("mode"), (int) a.get("uid"),
        (int) a.get("nlink"), (long) a.get("size"), ((FileTime) a.get("lastModifiedTime")).toMillis());
  }

  /**
   * The uid that owns the files this process creates (the effective uid: "Uid:" in /proc/self/status,
   * else the JDK's Unix login module); -1 where neither is available, which no file's owner matches.
   */
  public static int currentUid() { return MY_UID; }

  public boolean isRegularFile() { return (mode & S_IFMT) == S_IFREG; }
  public boolean isDirectory() { return (mode & S_IFMT) == S_IFDIR; }
  public boolean isSymbolicLink() { return (mode & S_IFMT) == S_IFLNK; }

  /** The permission bits with the set-id and sticky bits, e.g. 0600 or 01777 (without the file type). */
  public int permissions() { return mode & 07777; }

  /** Whether the sticky bit is set (in a directory: only an entry's owner may remove or rename it). */
  public boolean sticky() { return (mode & S_ISVTX) != 0; }

  /** Whether this process's user owns it. */
  public boolean ownedByMe() { return MY_UID >= 0 && uid == MY_UID; }

  /** Whether the same file (device and inode) as {@code o}. */
  public boolean sameFile(FileStat o) { return device == o.device && inode == o.inode; }

  /** "regular file", "directory", "symbolic link", "FIFO", ...: for messages. */
  public String type() {
    switch (mode & S_IFMT) {
      case S_IFREG: return "regular file";
      case S_IFDIR: return "directory";
      case S_IFLNK: return "symbolic link";
      case 0010000: return "FIFO";
      case 0140000: return "socket";
      case 0020000: return "character device";
      case 0060000: return "block device";
      default: return "file of type " + Integer.toOctalString(mode & S_IFMT);
    }
  }

  /** The read, write and execute bits as ls prints them, with {@link #permissions()} in octal: "rw-r--r-- (0644)". */
  public String permissionText() {
    StringBuilder b = new StringBuilder(9);
    String rwx = "rwx";
    for (int i = 8; i >= 0; i--) b.append((mode & (1 << i)) != 0 ? rwx.charAt(2 - i % 3) : '-');
    return b + " (0" + Integer.toOctalString(permissions()) + ")";
  }

  private static int readUid() {
    try {
      for (String l : Files.readAllLines(Path.of("/proc/self/status"))) {
        if (l.startsWith("Uid:")) {
          List<String> f = List.of(l.substring(4).trim().split("\\s+"));
          return Integer.parseInt(f.get(1));  // real, effective, saved, filesystem
        }
      }
    } catch (IOException | RuntimeException e) {
      // not Linux: below
    }
    try {
      return (int) new com.sun.security.auth.module.UnixSystem().getUid();
    } catch (RuntimeException | LinkageError e) {
      return -1;
    }
  }
}
