package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.rendezvous.RendezvousException;
import io.sparkcomms.spark.rendezvous.PluginRendezvous;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link PluginRendezvous} ranks (threads) meeting through the driver plugin, messages sealed and
 * encoded as over Spark's RPC. As in local mode, every rank's task runs in executor "driver", one
 * executor plugin (one sender) for all; partition p of stage s runs as task 1000 s + p.
 */
class PluginRendezvousTest {
  private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  private static List<String> strings(byte[][] blobs) {
    List<String> out = new ArrayList<>();
    for (byte[] x : blobs) out.add(new String(x, StandardCharsets.UTF_8));
    return out;
  }

  private static long task(int stage, int partition) { return 1000L * stage + partition; }

  /** The listener's report of barrier stage {@code stage} (attempt 0) with {@code size} tasks in executor "driver". */
  private static void started(TestExecutor executor, int stage, int size) {
    executor.driver.rendezvousRegistry().barrierStageSubmitted(stage, 0);
    for (int p = 0; p < size; p++) executor.driver.rendezvousRegistry().taskStarted(stage, 0, p, "driver", task(stage, p));
  }

  private static PluginRendezvous rank(TestExecutor executor, int stage, int rank, int size, AtomicBoolean killed) {
    return new PluginRendezvous(executor::ask, stage, 0, 0, rank, size, task(stage, rank), "test", killed::get);
  }

  @Test @Timeout(30) void ranksMeetOverTheDriverPluginInMilliseconds() throws Exception {
    TestExecutor driver = TestExecutor.of("driver");
    int size = 4;
    started(driver, 1, size);
    ExecutorService pool = Executors.newFixedThreadPool(size);
    try {
      List<Future<List<String>>> fs = new ArrayList<>();
      for (int p = 0; p < size; p++) {
        int me = p;
        fs.add(pool.submit(() -> {
          List<String> out = new ArrayList<>();
          try (PluginRendezvous rv = rank(driver, 1, me, size, new AtomicBoolean())) {
            for (int round = 0; round < 3; round++) {
              Thread.sleep(me * 5L);                                  // ranks arrive at different times
              long t0 = System.nanoTime();
              out.add(String.join(",", strings(rv.allGather(b(round + ":" + me), Duration.ofSeconds(10)))));
              out.add("ms=" + (System.nanoTime() - t0) / 1_000_000);
            }
          }
          return out;
        }));
      }
      for (int p = 0; p < size; p++) {
        List<String> out = fs.get(p).get(20, TimeUnit.SECONDS);
        for (int round = 0; round < 3; round++) {
          assertEquals(round + ":0," + round + ":1," + round + ":2," + round + ":3", out.get(2 * round));
          System.out.println("rank " + p + " round " + round + ": " + out.get(2 * round + 1)); // measured, not asserted
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test @Timeout(30) void aMissingRankRaisesOnEveryWaitingRankWithinTheTimeout() throws Exception {
    TestExecutor driver = TestExecutor.of("driver");
    started(driver, 2, 3);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<RendezvousException>> fs = new ArrayList<>();
      for (int p = 0; p < 2; p++) {                                  // ranks 0 and 1 of 3; rank 2 never comes
        int me = p;
        fs.add(pool.submit(() -> assertThrows(RendezvousException.class,
            () -> rank(driver, 2, me, 3, new AtomicBoolean()).allGather(b("x"), Duration.ofMillis(me == 0 ? 400 : 5000)))));
      }
      RendezvousException first = fs.get(0).get(10, TimeUnit.SECONDS);
      assertTrue(first.getMessage().contains("missing rank(s) [1, 2]") || first.getMessage().contains("missing rank(s) [2]"),
          first.getMessage());
      RendezvousException second = fs.get(1).get(10, TimeUnit.SECONDS);
      // rank 1 stopped at rank 0's abort, not at its own 5 s timeout (that message names missing ranks)
      assertTrue(second.getMessage().contains("rank 0 gave up"), "rank 0 aborted the group: " + second.getMessage());
    } finally {
      pool.shutdownNow();
    }
  }

  @Test @Timeout(30) void aKilledTaskOrAnEndedStageStopsTheWait() throws Exception {
    TestExecutor driver = TestExecutor.of("driver");
    started(driver, 3, 2);
    AtomicBoolean killed = new AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<RendezvousException> k = pool.submit(() -> assertThrows(RendezvousException.class,
          () -> rank(driver, 3, 0, 2, killed).allGather(b("x"), Duration.ofSeconds(20))));
      Thread.sleep(50);
      killed.set(true);
      assertTrue(k.get(5, TimeUnit.SECONDS).getMessage().contains("the task was killed"));

      driver.driver.rendezvousRegistry().stageEnded(4, 0);
      RendezvousException ended = assertThrows(RendezvousException.class,
          () -> rank(driver, 4, 0, 2, new AtomicBoolean()).allGather(b("x"), Duration.ofSeconds(20)));
      assertTrue(ended.getMessage().contains("has ended"), ended.getMessage());
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * The listener reports the tasks after the ranks' first deposits: the ranks are answered
   * UNVERIFIED, deposit again, and meet once the driver knows their tasks.
   */
  @Test @Timeout(30) void ranksMeetWhenTheListenerReportsTheirTasksLate() throws Exception {
    TestExecutor driver = TestExecutor.of("driver");
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      List<Future<List<String>>> fs = new ArrayList<>();
      for (int p = 0; p < 2; p++) {
        int me = p;
        fs.add(pool.submit(() -> strings(rank(driver, 6, me, 2, new AtomicBoolean()).allGather(b("r" + me), Duration.ofSeconds(10)))));
      }
      Thread.sleep(100);
      assertEquals(0, driver.driver.rendezvousRegistry().groupCount(), "nothing kept before the tasks are known");
      started(driver, 6, 2);
      for (Future<List<String>> f : fs) assertEquals(List.of("r0", "r1"), f.get(10, TimeUnit.SECONDS));
    } finally {
      pool.shutdownNow();
    }
  }

  @Test void aBlobOverTheLimitIsRefusedBeforeItIsSent() {
    TestExecutor driver = TestExecutor.of("driver");
    started(driver, 8, 2);
    RendezvousException e = assertThrows(RendezvousException.class, () -> rank(driver, 8, 0, 2, new AtomicBoolean())
        .allGather(new byte[RendezvousProtocol.MAX_BLOB_BYTES + 1], Duration.ofSeconds(5)));
    assertTrue(e.getMessage().contains("at most " + RendezvousProtocol.MAX_BLOB_BYTES + " per rank and round"), e.getMessage());
    assertEquals(0, driver.driver.rendezvousRegistry().groupCount());
  }

  /** A rank whose task the driver never learns gives up within its timeout, saying so. */
  @Test @Timeout(30) void aRankTheDriverCannotAttributeGivesUpWithinItsTimeout() {
    TestExecutor driver = TestExecutor.of("driver");
    RendezvousException e = assertThrows(RendezvousException.class,
        // 3 s, not less: the driver's first answer must arrive within the timeout, else the error is
        // "did not answer" (seen with 0.3 s on a loaded two-core machine)
        () -> rank(driver, 7, 0, 2, new AtomicBoolean()).allGather(b("x"), Duration.ofSeconds(3)));
    assertTrue(e.getMessage().contains("could not attribute this rank's deposit to its task within PT3S"), e.getMessage());
  }
}
