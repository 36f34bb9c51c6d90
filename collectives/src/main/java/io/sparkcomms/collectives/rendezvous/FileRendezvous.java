package io.sparkcomms.collectives.rendezvous;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;

/**
 * Rendezvous between processes that share a private directory (mode 0700, made by whoever launches
 * the ranks, see {@link #createDirectory()}). Round k: each rank writes {@code round-k.rank-r}
 * atomically (write to a temporary name, then rename) and polls until every rank's file exists.
 * A rank deletes its file of round k-1 once it has seen all files of round k (everyone has read
 * round k-1 by then); the launcher removes the directory at the end.
 */
public final class FileRendezvous implements Rendezvous {
  private final Path dir;
  private final int rank;
  private final int size;
  private long round;

  public FileRendezvous(Path dir, int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size) throw new IllegalArgumentException("rank " + rank + " of size " + size);
    if (!Files.isDirectory(dir)) throw new IllegalArgumentException("rendezvous directory " + dir + " does not exist");
    this.dir = dir;
    this.rank = rank;
    this.size = size;
  }

  /** A fresh directory readable only by this user, for the ranks of one communicator. */
  public static Path createDirectory() {
    try {
      return Files.createTempDirectory("sparkcomms-rv-", PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create a rendezvous directory", e);
    }
  }

  @Override public int rank() { return rank; }
  @Override public int size() { return size; }
  @Override public String describe() { return "file rendezvous in " + dir; }

  private Path file(long k, int r) { return dir.resolve("round-" + k + ".rank-" + r); }

  @Override public byte[][] allGather(byte[] mine, Duration timeout) {
    long k = round++;
    try {
      Path tmp = dir.resolve(".tmp-" + k + "-" + rank);
      Files.write(tmp, mine);
      try {
        Files.move(tmp, file(k, rank), StandardCopyOption.ATOMIC_MOVE);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(tmp, file(k, rank));
      }
      byte[][] out = new byte[size][];
      long deadline = System.nanoTime() + timeout.toNanos();
      long sleep = 20_000;
      int have = 0;
      while (have < size) {
        for (int r = 0; r < size; r++) {
          if (out[r] != null) continue;
          try {
            out[r] = Files.readAllBytes(file(k, r));
            have++;
          } catch (NoSuchFileException e) {
            // not there yet
          }
        }
        if (have == size) break;
        if (System.nanoTime() > deadline) {
          StringBuilder missing = new StringBuilder();
          for (int r = 0; r < size; r++) if (out[r] == null) missing.append(missing.length() == 0 ? "" : ",").append(r);
          throw new RendezvousException("rendezvous round " + k + " in " + dir + ": rank(s) " + missing
              + " did not arrive within " + timeout.toMillis() + " ms");
        }
        LockSupport.parkNanos(sleep);
        sleep = Math.min(sleep * 2, 5_000_000);
      }
      if (k > 0) Files.deleteIfExists(file(k - 1, rank));
      return out;
    } catch (IOException e) {
      throw new RendezvousException("rendezvous in " + dir + " failed: " + e, e);
    }
  }
}
