package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;

/**
 * The barrier of a host communicator, over the control blocks of an {@link ShmSegment}.
 *
 * <p>Each rank keeps a monotonic epoch: barrier k of a communicator has epoch k on every rank (all
 * ranks make the same calls). Rank r arrives by storing epoch k into its slot on every peer
 * (setRelease), then waits until every peer's slot on r holds at least k (getAcquire). Ordering
 * argument: everything r wrote to its staging area before the release store is visible to a peer
 * whose acquire load sees k, so after the barrier every rank can read every peer's data; and
 * because a peer only writes its staging area again after its next arrival, which needs our arrival
 * at the barrier that ends our reads, nobody overwrites data that is still being read. Epochs only
 * grow, so slots never need resetting.
 *
 * <p>Every wait is bounded: it gives up after the communicator's timeout (aborting the communicator so
 * the other ranks stop waiting too), stops as soon as any rank aborted, when the awaited peer closed its
 * communicator, or when the waiting thread is interrupted, and checks every {@link #LIVENESS_NANOS}
 * that the awaited peer's process still exists (peers whose process is visible here: same PID
 * namespace, see {@link PeerWatch#watchable}; a zombie counts as exited).
 *
 * <p>A peer's slot can only hold e-1, e or e+1 while this rank waits at epoch e (the peer cannot pass
 * barrier e+1 before this rank arrives there); any other value means the shared flags were corrupted,
 * and is an error rather than a barrier that passes without synchronizing.
 */
final class ShmSignals {
  private static final long LIVENESS_NANOS = 100_000_000L;
  private static final int SPINS = 4_000;
  private static final int YIELDS = 2_000;

  private final ShmSegment seg;
  private final int rank;
  private final int ranks;
  private final long timeoutNanos;
  private final ProcessId[] watched;  // by rank; null: not judged (this process, or not visible here)
  private long epoch;

  ShmSignals(ShmSegment seg, int rank, Duration timeout, ProcessId[] watched) {
    this.seg = seg;
    this.rank = rank;
    this.ranks = seg.ranks();
    this.timeoutNanos = timeout.toNanos();
    this.watched = watched.clone();
  }

  long epoch() { return epoch; }

  /** Full barrier: release our writes, acquire every peer's. {@code what} names the call for errors. */
  void barrier(String what) {
    long e = ++epoch;
    for (int p = 0; p < ranks; p++) {
      if (p != rank) ShmSegment.LONGS.setRelease(seg.ctrl, ShmSegment.slot(p, rank), e);
    }
    long deadline = System.nanoTime() + timeoutNanos;
    for (int p = 0; p < ranks; p++) {
      if (p != rank) await(p, e, deadline, what);
    }
  }

  private void await(int peer, long e, long deadline, String what) {
    int off = ShmSegment.slot(rank, peer);
    long nextLiveness = 0;
    for (int i = 0; ; i++) {
      long v = (long) ShmSegment.LONGS.getAcquire(seg.ctrl, off);
      if (v >= e) {
        if (v > e + 1) corrupted(peer, v, e, what);
        return;
      }
      if (i < SPINS) {
        Thread.onSpinWait();
        continue;
      }
      if (v < e - 1) corrupted(peer, v, e, what);
      if (seg.isAborted()) throw new CommAbortedException("communicator aborted: " + seg.abortReason());
      if (seg.isDetached(peer) && (long) ShmSegment.LONGS.getAcquire(seg.ctrl, off) < e) {
        String msg = "rank " + peer + " closed its communicator while rank " + rank + " waits for it in " + what;
        seg.abort(rank, msg);
        throw new CommAbortedException("communicator aborted: rank " + rank + ": " + msg);
      }
      if (Thread.currentThread().isInterrupted()) {
        String msg = "rank " + rank + " was interrupted while waiting for rank " + peer + " in " + what;
        seg.abort(rank, msg);
        throw new CommAbortedException("communicator aborted: " + msg);
      }
      long now = System.nanoTime();
      if (now - deadline > 0) {
        String msg = "rank " + rank + " timed out after " + timeoutNanos / 1_000_000 + " ms waiting for rank "
            + peer + " in " + what + " (barrier epoch " + e + ", peer at " + (long) ShmSegment.LONGS.getAcquire(seg.ctrl, off) + ")";
        seg.abort(rank, msg);
        throw new CommTimeoutException(msg);
      }
      if (nextLiveness == 0) {
        nextLiveness = now + LIVENESS_NANOS;  // the first check one period into the slow wait (a check reads /proc)
      } else if (now - nextLiveness > 0) {
        nextLiveness = now + LIVENESS_NANOS;
        checkAlive(peer, what);
      }
      if (i < SPINS + YIELDS) Thread.yield();
      else LockSupport.parkNanos(50_000);
    }
  }

  private void corrupted(int peer, long v, long e, String what) {
    String msg = "rank " + rank + ": the barrier flag of rank " + peer + " holds epoch " + v + " while this rank is at epoch "
        + e + " in " + what + ": the shared segment was corrupted";
    seg.abort(rank, msg);
    throw new CommException(msg);
  }

  private void checkAlive(int peer, String what) {
    ProcessId p = watched[peer];
    if (p != null && PeerWatch.exited(p)) {
      String msg = "rank " + peer + " (pid " + p.pid() + ") exited during " + what;
      seg.abort(rank, msg);
      throw new CommAbortedException("communicator aborted: rank " + rank + ": " + msg);
    }
  }
}
