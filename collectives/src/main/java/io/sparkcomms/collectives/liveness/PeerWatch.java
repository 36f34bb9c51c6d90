package io.sparkcomms.collectives.liveness;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Watches the processes of a communicator's peers from one daemon thread per JVM and reports the
 * first that exits, once. For backends whose waits happen where no host code runs (the GPU kernels
 * wait on device memory): the owner aborts its communicator from the callback, so its ranks fail in
 * about {@link #PERIOD_MILLIS} instead of at the timeout.
 *
 * <p>Lifecycle: {@link #watch} starts it; {@link Watch#close()} stops it and returns only when no
 * check of it is running, so the owner may free what the callback uses right after.
 */
public final class PeerWatch {
  private PeerWatch() {}

  /** How often every watched peer is checked. */
  public static final long PERIOD_MILLIS = 200;

  private static final ScheduledExecutorService TIMER = timer();

  private static ScheduledExecutorService timer() {
    ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
      Thread th = new Thread(r, "sparkcomms-peer-watch");
      th.setDaemon(true);
      return th;
    });
    t.setRemoveOnCancelPolicy(true);
    return t;
  }

  /** A running watch. */
  public static final class Watch implements AutoCloseable {
    private final ProcessId[] peers;
    private final Consumer<String> onGone;
    private final String what;
    private ScheduledFuture<?> task;
    private boolean stopped;  // guarded by this

    private Watch(ProcessId[] peers, String what, Consumer<String> onGone) {
      this.peers = peers;
      this.what = what;
      this.onGone = onGone;
    }

    private synchronized void check() {
      if (stopped) return;
      for (int r = 0; r < peers.length; r++) {
        if (peers[r] != null && exited(peers[r])) {
          stopped = true;  // report once
          task.cancel(false);
          onGone.accept("rank " + r + " (pid " + peers[r].pid() + ") exited; " + what);
          return;
        }
      }
    }

    /** Stops the watch; waits for a check (and its callback) that is running now. */
    @Override public synchronized void close() {
      stopped = true;
      if (task != null) task.cancel(false);
    }
  }

  /**
   * Watches {@code peers} (index = rank; null = not watched: this rank, or a peer not visible here,
   * see {@link ProcessId#visible()}); {@code onGone} gets a message naming the first that exited.
   * Returns null when there is nothing to watch.
   */
  public static Watch watch(ProcessId[] peers, String what, Consumer<String> onGone) {
    boolean any = false;
    for (ProcessId p : peers) any |= p != null;
    if (!any) return null;
    Watch w = new Watch(peers.clone(), what, onGone);
    synchronized (w) {  // the first check cannot run before task is set
      w.task = TIMER.scheduleWithFixedDelay(w::check, PERIOD_MILLIS, PERIOD_MILLIS, TimeUnit.MILLISECONDS);
    }
    return w;
  }

  /**
   * {@link ProcessId#gone()}, where a check that fails is no verdict (false) and does not escape: a
   * timer task that throws is dropped, and a barrier must not fail on a check that could not be made.
   */
  public static boolean exited(ProcessId p) {
    try {
      return p.gone();
    } catch (RuntimeException e) {
      return false;
    }
  }

  /** The peers of {@code all} (everyone's {@link ProcessId#encode()}, by rank) that can be watched from here. */
  public static ProcessId[] watchable(byte[][] all, int self) {
    ProcessId[] ids = new ProcessId[all.length];
    for (int r = 0; r < all.length; r++) ids[r] = ProcessId.decode(all[r]);
    return watchable(ids, self);
  }

  /**
   * The peers of {@code all} (by rank; null = unknown) that can be watched from here, as this JVM sees
   * them ({@link ProcessId#seenHere()}); null for this rank, this very process (ranks as threads) and
   * peers not visible here. Call it while every peer is known to be alive (right after they answered).
   */
  public static ProcessId[] watchable(ProcessId[] all, int self) {
    ProcessId[] out = new ProcessId[all.length];
    long me = ProcessHandle.current().pid();
    for (int r = 0; r < all.length; r++) {
      ProcessId p = all[r];
      out[r] = r != self && p != null && p.pid() != me ? p.seenHere() : null;
    }
    return out;
  }
}
