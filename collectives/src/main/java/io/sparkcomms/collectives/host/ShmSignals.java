package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import java.lang.invoke.VarHandle;
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
 * <p><b>One outcome per barrier.</b> A rank that has seen every arrival and a rank that gives up
 * (timeout, abort, a peer gone) could otherwise end the same barrier differently: one returns, the
 * other raises. So every barrier's outcome is decided once, for all ranks, in the segment's outcome
 * word (last decided epoch, failed bit): the first rank to decide epoch k compare-and-sets it from
 * (k-1, passed) to (k, passed) or (k, failed); every other rank follows that decision. A rank that
 * timed out after its peers passed therefore passes too (its arrival was seen), and a rank that saw
 * every arrival after a peer failed the barrier fails too. A rank gives up on a barrier only after
 * aborting the communicator, so no call follows a failed barrier.
 *
 * <p><b>Waiting.</b> A wait spins for up to {@link #SPIN_NANOS} (a peer that runs arrives within a
 * few microseconds; after a wait that ended asleep the budget is {@link #MIN_SPIN_NANOS} until a spin succeeds;
 * with more ranks than cores the spin yields the core at each turn), then sleeps on the
 * {@link ShmWake} channel: it raises its sleeping flag, re-reads the
 * slot, and blocks; an arriving rank that sees the flag sends a wake byte. Ordering argument (Dekker):
 * the sleeper stores its flag then loads the slot, the arriver stores the slot then loads the flag,
 * each pair separated by a full fence, so at least one of them sees the other's store: either the
 * sleeper sees the arrival and does not block, or the arriver sees the flag and wakes it. A sleeping
 * rank uses no CPU; the kernel runs it as soon as the wake byte arrives. For a peer without a wake
 * channel (its port published as -1) a wait parks for growing periods up to {@link #MAX_PARK_NANOS}.
 *
 * <p>Every wait is bounded: it gives up after the communicator's timeout (aborting the communicator so
 * the other ranks stop waiting too), stops as soon as any rank aborted, when the awaited peer closed its
 * communicator, or when the waiting thread is interrupted, and checks every {@link #LIVENESS_NANOS}
 * that the awaited peer's process still exists (peers whose process is visible here: same PID
 * namespace, see {@link PeerWatch#watchable}; a zombie counts as exited).
 *
 * <p>A peer's slot can only hold e-1, e or e+1 while this rank waits at epoch e (the peer cannot pass
 * barrier e+1 before this rank arrives there), and the outcome word only e-1 or e; any other value
 * means the shared flags were corrupted, and is an error rather than a barrier that passes without
 * synchronizing.
 */
final class ShmSignals {
  private static final long LIVENESS_NANOS = 100_000_000L;
  /**
   * The longest spin before sleeping. A barrier between two running ranks takes 0.3 us (median,
   * 2-vCPU VM); waking a sleeper costs a system call on each side, tens of microseconds with a busy
   * core; a spin shorter than that makes idle ranks convoy (docs/design.md).
   */
  static final long SPIN_NANOS = 200_000L;
  /**
   * The spin after a wait that ended asleep: ranks that share their cores with other work (whose
   * peer is often not running) stop spending the cores on spins that fail. A wait that ends in its
   * spin restores the full budget, and every {@link #PROBE_EVERY}th wait spins the full budget
   * whatever came before, so ranks that run again leave the short spin (where each would otherwise
   * wake the other at every barrier).
   */
  static final long MIN_SPIN_NANOS = 5_000L;
  static final int PROBE_EVERY = 16;
  private static final long MIN_PARK_NANOS = 20_000L;
  private static final long MAX_PARK_NANOS = 1_000_000L;

  private final ShmSegment seg;
  private final int rank;
  private final int ranks;
  /** The bound of every wait: the communicator's timeout, or the running call's own ({@link #useTimeout}). */
  private volatile long timeoutNanos;
  private final long commTimeoutNanos;
  private final ProcessId[] watched;  // by rank; null: not judged (this process, or not visible here)
  private final ShmWake wake;         // null: no wake channel, waits park
  /** More ranks than this process may run at once: a spinning wait yields its core instead. */
  private final boolean oversubscribed;
  private long spinNanos = SPIN_NANOS;
  private long waits;
  private long epoch;

  ShmSignals(ShmSegment seg, int rank, Duration timeout, ProcessId[] watched, ShmWake wake) {
    this.seg = seg;
    this.rank = rank;
    this.ranks = seg.ranks();
    this.timeoutNanos = timeout.toNanos();
    this.commTimeoutNanos = timeoutNanos;
    this.watched = watched.clone();
    this.wake = wake;
    this.oversubscribed = ranks > Runtime.getRuntime().availableProcessors();
  }

  /** Bounds the waits of the calls from now on by {@code t} (null: the communicator's timeout again). */
  void useTimeout(java.time.Duration t) { timeoutNanos = t == null ? commTimeoutNanos : t.toNanos(); }


  long epoch() { return epoch; }

  /** Full barrier: release our writes, acquire every peer's. {@code what} names the call for errors. */
  void barrier(String what) {
    long e = ++epoch;
    if (ranks == 1) return;
    for (int p = 0; p < ranks; p++) {
      if (p != rank) ShmSegment.LONGS.setRelease(seg.ctrl, ShmSegment.slot(p, rank), e);
    }
    if (wake != null) {
      VarHandle.fullFence();  // our slot stores before the sleeping flags' loads (Dekker, see the class comment)
      for (int p = 0; p < ranks; p++) {
        if (p != rank && (int) ShmSegment.INTS.getVolatile(seg.ctrl, ShmSegment.sleeping(p)) != 0) wake.wake(p);
      }
    }
    long deadline = System.nanoTime() + timeoutNanos;
    for (int p = 0; p < ranks; p++) {
      if (p != rank && !await(p, e, deadline, what)) return;  // decided passed while giving up: every rank arrived
    }
    if (!decide(e, true)) failedElsewhere(e, what);
  }

  /**
   * Waits for {@code peer}'s arrival at epoch {@code e}. Returns true when it arrived; false when this
   * rank gave up but barrier {@code e} had been decided passed (every rank, this one included, had
   * arrived); raises when this rank gave up and the barrier failed.
   */
  private boolean await(int peer, long e, long deadline, String what) {
    int off = ShmSegment.slot(rank, peer);
    long start = System.nanoTime();
    long nextLiveness = 0;
    long park = MIN_PARK_NANOS;
    boolean slept = false;
    long spin = (++waits & (PROBE_EVERY - 1)) == 0 ? SPIN_NANOS : spinNanos;
    for (int i = 0; ; i++) {
      long v = (long) ShmSegment.LONGS.getAcquire(seg.ctrl, off);
      if (v >= e) {
        if (v > e + 1) corrupted(peer, v, e, what);
        spinNanos = slept ? MIN_SPIN_NANOS : SPIN_NANOS;
        return true;
      }
      if ((i & 63) != 0 || System.nanoTime() - start < spin) {
        if (oversubscribed) Thread.yield();  // the awaited rank may need this core
        else Thread.onSpinWait();
        continue;
      }
      if (v < e - 1) corrupted(peer, v, e, what);
      if (decided(e) == FAILED) failedElsewhere(e, what);
      if (seg.isAborted()) return giveUp(e, new CommAbortedException("communicator aborted: " + seg.abortReason()), null);
      if (seg.isDetached(peer) && (long) ShmSegment.LONGS.getAcquire(seg.ctrl, off) < e) {
        String msg = "rank " + peer + " closed its communicator while rank " + rank + " waits for it in " + what;
        return giveUp(e, new CommAbortedException("communicator aborted: rank " + rank + ": " + msg), msg);
      }
      if (Thread.currentThread().isInterrupted()) {
        String msg = "rank " + rank + " was interrupted while waiting for rank " + peer + " in " + what;
        return giveUp(e, new CommAbortedException("communicator aborted: " + msg), msg);
      }
      long now = System.nanoTime();
      if (now - deadline > 0) {
        String msg = "rank " + rank + " timed out after " + timeoutNanos / 1_000_000 + " ms waiting for rank "
            + peer + " in " + what + " (barrier epoch " + e + ", peer at " + (long) ShmSegment.LONGS.getAcquire(seg.ctrl, off) + ")";
        return giveUp(e, new CommTimeoutException(msg), msg);
      }
      if (nextLiveness == 0) {
        nextLiveness = now + LIVENESS_NANOS;  // the first check one period into the slow wait (a check reads /proc)
      } else if (now - nextLiveness > 0) {
        nextLiveness = now + LIVENESS_NANOS;
        ProcessId p = watched[peer];
        if (p != null && PeerWatch.exited(p)) {
          String msg = "rank " + peer + " (pid " + p.pid() + ") exited during " + what;
          return giveUp(e, new CommAbortedException("communicator aborted: rank " + rank + ": " + msg), msg);
        }
      }
      long bound = Math.min(deadline - now, nextLiveness - now);
      slept = true;
      if (wake != null && wake.connectedTo(peer) && seg.wakePort(peer) > 0) {
        sleep(off, e, bound);
      } else {
        LockSupport.parkNanos(Math.min(park, bound));
        park = Math.min(MAX_PARK_NANOS, park * 2);
      }
    }
  }

  /** Sleeps on the wake channel until woken or {@code nanos} pass, unless the slot at {@code off} reached {@code e}. */
  private void sleep(int off, long e, long nanos) {
    int flag = ShmSegment.sleeping(rank);
    ShmSegment.INTS.setVolatile(seg.ctrl, flag, 1);
    try {
      VarHandle.fullFence();  // our flag store before the slot's load (Dekker, see the class comment)
      if ((long) ShmSegment.LONGS.getVolatile(seg.ctrl, off) >= e) return;
      wake.await(nanos);
    } finally {
      ShmSegment.INTS.setRelease(seg.ctrl, flag, 0);
    }
  }

  /**
   * This rank gives up on barrier {@code e}: decides it failed unless it was decided already. Returns
   * false if it had been decided passed (the caller returns from the barrier); else records
   * {@code abortReason} (when non-null) as the communicator's abort, wakes every peer and raises
   * {@code failure}.
   */
  private boolean giveUp(long e, CommException failure, String abortReason) {
    if (decide(e, false)) return false;
    if (abortReason != null) seg.abort(rank, abortReason);
    if (wake != null) wake.wakeAll();
    throw failure;
  }

  /** The outcome word. */
  private long outcome() { return (long) ShmSegment.LONGS.getVolatile(seg.ctrl, ShmSegment.OUTCOME); }

  private static final int UNDECIDED = 0, PASSED = 1, FAILED = 2;

  /**
   * The decision on barrier {@code e} in outcome word {@code w}. While this rank is in barrier e the
   * word can only hold (e-1, passed): undecided; (e, passed) or (e, failed); or (e+1, failed): a peer
   * that passed e gave up on e+1, so e passed. Anything else is corruption.
   */
  private int decision(long e, long w) {
    long we = w >>> 1;
    boolean failed = (w & 1) != 0;
    if (we == e - 1 && !failed) return UNDECIDED;
    if (we == e) return failed ? FAILED : PASSED;
    if (we == e + 1 && failed) return PASSED;
    String msg = "rank " + rank + ": the barrier outcome word holds epoch " + we + (failed ? " (failed)" : "")
        + " while this rank is at epoch " + e + ": the shared segment was corrupted";
    seg.abort(rank, msg);
    throw new CommException(msg);
  }

  private int decided(long e) { return decision(e, outcome()); }

  /** Decides barrier {@code e} as {@code passed} unless it was decided already; returns the decision. */
  private boolean decide(long e, boolean passed) {
    for (;;) {
      long w = outcome();
      int d = decision(e, w);
      if (d != UNDECIDED) return d == PASSED;
      if (ShmSegment.LONGS.compareAndSet(seg.ctrl, ShmSegment.OUTCOME, w, e << 1 | (passed ? 0 : 1))) return passed;
    }
  }

  /** Another rank decided that barrier {@code e} (or an earlier one) failed: raise its reason. */
  private void failedElsewhere(long e, String what) {
    long until = System.nanoTime() + 50_000_000L;  // the deciding rank records its reason right after deciding
    while (!seg.isAborted() && System.nanoTime() - until < 0) Thread.onSpinWait();
    String reason = seg.isAborted() ? seg.abortReason() : "another rank gave up on it";
    throw new CommAbortedException("communicator aborted: rank " + rank + " in " + what + " (barrier epoch " + e + "): " + reason);
  }

  private void corrupted(int peer, long v, long e, String what) {
    String msg = "rank " + rank + ": the barrier flag of rank " + peer + " holds epoch " + v + " while this rank is at epoch "
        + e + " in " + what + ": the shared segment was corrupted";
    seg.abort(rank, msg);
    throw new CommException(msg);
  }
}
