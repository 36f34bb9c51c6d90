package io.sparkcomms.collectives.host;

import static io.sparkcomms.collectives.host.ShmSegment.CREATOR_NS;
import static io.sparkcomms.collectives.host.ShmSegment.CREATOR_PID;
import static io.sparkcomms.collectives.host.ShmSegment.CREATOR_START;

import io.sparkcomms.collectives.liveness.ProcessId;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;

/** The segment files of the host backend in their directory: where they live, and the removal of stale ones. */
final class ShmFiles {
  private ShmFiles() {}

  /** Where segments live: /dev/shm when present, else the temp directory. */
  static Path baseDirectory() {
    Path shm = Paths.get("/dev/shm");
    return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Paths.get(System.getProperty("java.io.tmpdir"));
  }

  /** A segment file without its creator record this old was left by a creator killed right after creating it. */
  static final long UNATTRIBUTED_STALE_MILLIS = 5_000;

  /** What one sweep did: directory entries it looked at, files it removed. */
  record Sweep(int examined, int removed) {}

  /**
   * Removes segment files whose creator process is gone. A segment's name exists only from its creation
   * until every rank has mapped it, so a file left behind means its creator was killed in that window.
   * The creator's pid, start time and PID namespace are the first bytes written to a new file; a file
   * without them (creator killed microseconds after creating it) counts as stale once
   * {@link #UNATTRIBUTED_STALE_MILLIS} old. Only files this user can read are considered (others' are
   * 0600). A creator of another PID namespace sharing this /dev/shm is never judged (its pid means
   * nothing here): its file is left, rather than a live job's removed. Best effort.
   */
  static Sweep sweepStale(Path dir) {
    int examined = 0, removed = 0;
    try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "sparkcomms-*")) {
      for (Path p : ds) {
        examined++;
        if (!isStale(p)) continue;
        try {
          if (Files.deleteIfExists(p)) removed++;
        } catch (IOException e) {
          // another process removed it, or we may not
        }
      }
    } catch (IOException | RuntimeException e) {
      // best effort
    }
    return new Sweep(examined, removed);
  }

  /** Whether {@code p} is a segment whose creator process no longer exists (or its pid was reused). */
  static boolean isStale(Path p) {
    ByteBuffer h = ByteBuffer.allocate(CREATOR_NS + 8).order(ByteOrder.nativeOrder());
    long ageMillis;
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ)) {
      while (h.hasRemaining() && ch.read(h) > 0) {
        // read the header
      }
      ageMillis = System.currentTimeMillis() - Files.getLastModifiedTime(p).toMillis();
    } catch (IOException | SecurityException e) {
      return false; // gone, or not ours
    }
    long pid = h.position() == h.capacity() ? h.getLong(CREATOR_PID) : 0;
    if (pid <= 0) return ageMillis > UNATTRIBUTED_STALE_MILLIS;
    long start = h.getLong(CREATOR_START), ns = h.getLong(CREATOR_NS);  // 0: unknown
    // exited, a zombie, or its pid reused; never "gone" while this process cannot read /proc, nor
    // when the creator lives in another PID namespace
    return new ProcessId(pid, start == 0 ? -1 : start, ns == 0 ? -1 : ns).gone(ProcessId.START_TOLERANCE_MILLIS);
  }
}
