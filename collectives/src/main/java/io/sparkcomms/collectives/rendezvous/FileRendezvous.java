package io.sparkcomms.collectives.rendezvous;

import io.sparkcomms.collectives.FileStat;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.ClosedByInterruptException;
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
 * the ranks, see {@link #createDirectory()}; one that other users can write is refused). Round k: each
 * rank writes {@code round-k.rank-r} atomically (write to a temporary name, then rename) and polls until every rank's file exists.
 * A rank deletes its file of round k-1 once it has seen all files of round k (everyone has read
 * round k-1 by then); the launcher removes the directory at the end.
 *
 * <p>A rank that arrives more than the timeout after a peer finds that peer's file still there, goes on
 * to the next round and times out there, since the peer gave up. So the error says where the time
 * went, a rank notes when it arrived that late (from the files' modification times) and names it if
 * the next round times out.
 */
public final class FileRendezvous implements Rendezvous {
  private final Path dir;
  private final int rank;
  private final int size;
  private long round;
  /** Set when this rank arrived in round {@link #lateRound} more than the timeout after a peer. */
  private String lateNote = "";
  private long lateRound = -1;

  /**
   * Rank {@code rank} of {@code size} over {@code dir}. Whoever can write the directory can write any
   * rank's messages (rank 0's names the shared-memory segment the others map), so the directory must be
   * a directory (not a symbolic link) owned by this process's user that no other user can write;
   * {@link IllegalArgumentException} otherwise.
   */
  public FileRendezvous(Path dir, int rank, int size) {
    if (size < 1 || rank < 0 || rank >= size) throw new IllegalArgumentException("rank " + rank + " of size " + size);
    if (!Files.isDirectory(dir)) throw new IllegalArgumentException("rendezvous directory " + dir + " does not exist");
    String why = directoryProblem(dir);
    if (why != null) throw new IllegalArgumentException("rendezvous directory " + dir + " is refused: " + why);
    this.dir = dir;
    this.rank = rank;
    this.size = size;
  }

  /** Why {@code dir} is no private rendezvous directory (completing "rendezvous directory DIR is refused: "), or null. */
  private static String directoryProblem(Path dir) {
    FileStat d;
    try {
      d = FileStat.of(dir);
    } catch (IOException e) {
      return "it cannot be checked: " + e;
    }
    if (d.isSymbolicLink()) return "it is a symbolic link; pass the directory itself";
    if (!d.ownedByMe()) return "it is owned by uid " + d.uid() + ", not by this process's uid " + FileStat.currentUid();
    if ((d.permissions() & 0022) != 0) {
      return "other users can write it (mode " + d.permissionText() + "), and with it the ranks' messages;"
          + " use a directory of mode 0700 (FileRendezvous.createDirectory())";
    }
    return null;
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

  /**
   * {@inheritDoc} An interrupt of the calling thread ends the wait at once with a
   * {@link RendezvousException} that says so; the thread's interrupt stays set.
   */
  @Override public byte[][] allGather(byte[] mine, Duration timeout) {
    long k = round++;
    byte[][] out = new byte[size][];
    try {
      if (Thread.currentThread().isInterrupted()) throw interrupted(k, out);
      Path tmp = dir.resolve(".tmp-" + k + "-" + rank);
      Files.write(tmp, mine);
      try {
        Files.move(tmp, file(k, rank), StandardCopyOption.ATOMIC_MOVE);
      } catch (AtomicMoveNotSupportedException e) {
        Files.move(tmp, file(k, rank));
      }
      long written = -1;  // our file's modification time, read when first needed (same clock as the peers')
      long deadline = System.nanoTime() + timeout.toNanos();
      long sleep = 20_000;
      int have = 0;
      while (have < size) {
        for (int r = 0; r < size; r++) {
          if (out[r] != null) continue;
          try {
            out[r] = Files.readAllBytes(file(k, r));
            have++;
            if (r != rank && lateRound < 0) written = noteIfLate(k, r, written, timeout);
          } catch (NoSuchFileException e) {
            // not there yet
          }
        }
        if (have == size) break;
        if (System.nanoTime() > deadline) {
          throw new RendezvousException("rendezvous round " + k + " in " + dir + ": rank(s) " + missing(out)
              + " did not arrive within " + timeout.toMillis() + " ms" + (lateRound == k - 1 ? lateNote : ""));
        }
        // parkNanos returns at once while the interrupt is set: without this check the loop would spin
        if (Thread.currentThread().isInterrupted()) throw interrupted(k, out);
        LockSupport.parkNanos(sleep);
        sleep = Math.min(sleep * 2, 5_000_000);
      }
      if (k > 0) Files.deleteIfExists(file(k - 1, rank));
      return out;
    } catch (ClosedByInterruptException e) {
      // a file operation saw the interrupt (and left it set)
      RendezvousException x = interrupted(k, out);
      x.initCause(e);
      throw x;
    } catch (IOException e) {
      throw new RendezvousException("rendezvous in " + dir + " failed: " + e, e);
    }
  }

  /** Ranks whose file of the round has not been read, "1,3". */
  private String missing(byte[][] out) {
    StringBuilder missing = new StringBuilder();
    for (int r = 0; r < size; r++) if (out[r] == null) missing.append(missing.length() == 0 ? "" : ",").append(r);
    return missing.toString();
  }

  private RendezvousException interrupted(long k, byte[][] out) {
    return new RendezvousException("rank " + rank + " was interrupted in rendezvous round " + k + " in " + dir
        + " (files of rank(s) " + missing(out) + " not read yet)");
  }

  /**
   * Peer {@code r}'s file of round {@code k} was written more than the timeout before this rank's (the
   * peer has given up unless it was itself held up right after its write): noted for a time-out in the
   * next round. Both times are file modification times, so they come from one clock. Best effort: a
   * file that cannot be read is no note. Returns this rank's file time (-1 if not read).
   */
  private long noteIfLate(long k, int r, long mineMillis, Duration timeout) {
    try {
      if (mineMillis < 0) mineMillis = Files.getLastModifiedTime(file(k, rank)).toMillis();
      long ahead = mineMillis - Files.getLastModifiedTime(file(k, r)).toMillis();
      if (ahead > timeout.toMillis()) {
        lateRound = k;
        lateNote = "; this rank arrived late: in round " + k + " it came " + ahead + " ms after rank " + r
            + ", more than the timeout, so rank " + r + " had most likely given up";
      }
    } catch (IOException | RuntimeException e) {
      // no note
    }
    return mineMillis;
  }
}
