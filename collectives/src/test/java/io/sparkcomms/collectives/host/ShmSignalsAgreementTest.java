package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.liveness.ProcessId;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every barrier ends the same way on every rank: with a 1 ms timeout and random delays before each
 * barrier, some barriers time out on one rank while its peer sees every arrival; the ranks must then
 * agree (both pass, or both fail), never one passing a barrier the other failed.
 */
class ShmSignalsAgreementTest {
  @TempDir Path dir;

  private static final int TRIALS = 300;
  private static final int BARRIERS = 40;

  @Test void ranksAgreeOnEveryBarriersOutcome() throws Exception {
    agree(false);
  }

  @Test void ranksAgreeWithSleepingWaits() throws Exception {
    agree(true);
  }

  private void agree(boolean wakeChannel) throws Exception {
    int failedTrials = 0;
    List<String> disagreements = new ArrayList<>();
    SplittableRandom seeds = new SplittableRandom(20261202L + (wakeChannel ? 1 : 0));
    for (int t = 0; t < TRIALS; t++) {
      long seed = seeds.nextLong();
      int[] passed = new int[2];   // barriers each rank passed before its first failure (or all)
      boolean[] failed = new boolean[2];
      try (ShmSegment seg = ShmSegment.create(dir, 2, ShmSegment.MIN_STAGING_BYTES)) {
        seg.unlink();
        ShmWake[] wakes = wakeChannel ? connectedWakes(seg) : new ShmWake[2];
        try {
          CountDownLatch done = new CountDownLatch(2);
          Thread[] ths = new Thread[2];
          for (int r = 0; r < 2; r++) {
            int rank = r;
            ShmSignals sig = new ShmSignals(seg, rank, Duration.ofMillis(1), new ProcessId[2], wakes[rank]);
            SplittableRandom rnd = new SplittableRandom(seed + rank);
            ths[r] = new Thread(() -> {
              try {
                for (int b = 0; b < BARRIERS; b++) {
                  // mostly on time; now and then late by around the timeout
                  int u = rnd.nextInt(100);
                  if (u >= 90) LockSupport.parkNanos(rnd.nextLong(500_000, 2_000_000));
                  sig.barrier("barrier " + b);
                  passed[rank]++;
                }
              } catch (CommException e) {
                failed[rank] = true;
              } finally {
                done.countDown();
              }
            }, "agreement-rank-" + r);
            ths[r].start();
          }
          assertTrue(done.await(60, TimeUnit.SECONDS), "trial " + t + ": a rank did not finish");
          for (Thread th : ths) th.join();
        } finally {
          for (ShmWake w : wakes) if (w != null) w.close();
        }
      }
      if (failed[0] || failed[1]) failedTrials++;
      if (passed[0] != passed[1] || failed[0] != failed[1]) {
        disagreements.add("trial " + t + " (seed " + seed + "): rank 0 passed " + passed[0] + (failed[0] ? " then failed" : "")
            + ", rank 1 passed " + passed[1] + (failed[1] ? " then failed" : ""));
      }
    }
    assertEquals(List.of(), disagreements, disagreements.size() + " of " + TRIALS + " trials ended a barrier differently on the two ranks");
    // the test means something only if timeouts did happen
    assertTrue(failedTrials > 0, "no barrier timed out in " + TRIALS + " trials: the delays did not exercise the timeout");
  }

  /** The two ranks' wake channels over loopback, as a communicator connects them. */
  private static ShmWake[] connectedWakes(ShmSegment seg) throws Exception {
    ShmWake[] w = {ShmWake.listen(0, 2), ShmWake.listen(1, 2)};
    int[] ports = {w[0].port(), w[1].port()};
    byte[] token = seg.wakeToken();
    long deadline = System.nanoTime() + 10_000_000_000L;
    Thread t = new Thread(() -> {
      try {
        w[1].connect(p -> ports[p], token, deadline, p -> false);
      } catch (Exception e) {
        throw new IllegalStateException(e);
      }
    });
    t.start();
    w[0].connect(p -> ports[p], token, deadline, p -> false);
    t.join();
    return w;
  }
}
