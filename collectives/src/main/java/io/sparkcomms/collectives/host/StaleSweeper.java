package io.sparkcomms.collectives.host;

import java.nio.file.Path;
import java.util.Iterator;
import java.util.LinkedHashSet;
import java.util.Set;

/**
 * Runs {@link ShmFiles#sweepStale} on a daemon thread of its own, so that creating a segment never
 * waits for it. Requests coalesce: at most one sweep runs per JVM, and a directory asked for while one
 * runs is swept once more after it (so a creation always triggers a sweep that starts after it asked).
 * A sweep cannot block on a planted file (it opens none that its lstat did not show to be a regular
 * file of this user); should one hang nevertheless, later requests are only queued, creation still
 * proceeds.
 */
final class StaleSweeper {
  private StaleSweeper() {}

  private static final Object LOCK = new Object();
  /** Directories to sweep; guarded by LOCK. */
  private static final Set<Path> PENDING = new LinkedHashSet<>();
  /** Whether a sweeper thread runs; guarded by LOCK. */
  private static boolean running;

  /** Asks for a sweep of {@code dir}; returns at once. */
  static void request(Path dir) {
    synchronized (LOCK) {
      PENDING.add(dir);
      if (running) return;
      running = true;
    }
    try {
      Thread t = new Thread(StaleSweeper::drain, "sparkcomms-shm-sweep");
      t.setDaemon(true);
      t.start();
    } catch (RuntimeException | Error e) {
      synchronized (LOCK) {
        running = false;  // no thread (out of memory or threads): the next request tries again
        LOCK.notifyAll();
      }
    }
  }

  private static void drain() {
    boolean idle = false;
    try {
      while (true) {
        Path dir;
        synchronized (LOCK) {
          Iterator<Path> it = PENDING.iterator();
          if (!it.hasNext()) {
            // decided under the lock that also guards request(): a request either is in PENDING now or
            // sees running false and starts a new thread
            running = false;
            idle = true;
            LOCK.notifyAll();
            return;
          }
          dir = it.next();
          it.remove();
        }
        ShmFiles.sweepStale(dir);  // best effort: it catches its own failures
      }
    } finally {
      if (!idle) {
        synchronized (LOCK) {
          running = false;  // an Error ended this thread: the next request starts another
          LOCK.notifyAll();
        }
      }
    }
  }

  /** Waits until no sweep runs or is pending; false if that took longer than {@code millis}. For tests. */
  static boolean awaitIdle(long millis) throws InterruptedException {
    long until = System.nanoTime() + millis * 1_000_000L;
    synchronized (LOCK) {
      while (running || !PENDING.isEmpty()) {
        long left = (until - System.nanoTime()) / 1_000_000L;
        if (left <= 0) return false;
        LOCK.wait(left);
      }
      return true;
    }
  }
}
