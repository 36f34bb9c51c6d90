package io.sparkcomms.collectives.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A rank paused beyond the timeout (SIGSTOP), a corrupted barrier flag, a rank that detaches (closes)
 * while its peers still call, and ranks out of step: every rank gets a clear error, nothing hangs, and a
 * new communicator works afterwards.
 */
class PauseCorruptDetachTest {
  private final List<Worker> workers = new ArrayList<>();
  private final List<Path> dirs = new ArrayList<>();

  @AfterEach void tearDown() {
    for (Worker w : workers) {
      if (w.process.isAlive()) ShmProbe.signal(w.pid(), "CONT");
      w.close();
    }
    dirs.forEach(ShmProbe::deleteTree);
  }

  static CommOptions opts(long timeoutMs) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(timeoutMs)).build();
  }

  private Path dir() {
    Path d = FileRendezvous.createDirectory();
    dirs.add(d);
    return d;
  }

  private static long ms(long nanos) { return TimeUnit.NANOSECONDS.toMillis(nanos); }

  private static final Set<String> TIMEOUT_OR_ABORT = Set.of("CommTimeoutException", "CommAbortedException");

  @Test
  void aRankPausedBeyondTheTimeoutMakesTheOthersTimeOutNamingIt() {
    int n = 3, victim = 1;
    long timeoutMs = 1_500, slackMs = 30_000; // slack: a hang guard, not a bound on the raise time
    for (int r = 0; r < n; r++) workers.add(Worker.start());
    for (Worker w : workers) assertTrue(w.awaitReady(60_000), w.tail());
    Path d = dir();
    for (int r = 0; r < n; r++) workers.get(r).send("RUN p " + d + " " + r + " " + n + " ALL_REDUCE FLAT 7 " + timeoutMs + " 65536 4096 -1");
    for (Worker w : workers) assertNotNull(w.await("CREATED p ", System.nanoTime() + 30_000_000_000L), w.tail());
    sleep(200);
    long tStop = System.nanoTime();
    ShmProbe.signal(workers.get(victim).pid(), "STOP");
    int timeouts = 0;
    for (int r = 0; r < n; r++) {
      if (r == victim) continue;
      Worker.Trial tr = workers.get(r).collect("p", tStop + (timeoutMs + slackMs) * 1_000_000L);
      assertNotNull(tr.end(), "rank " + r + " did not raise within timeout + slack: " + workers.get(r).tail());
      assertEquals(0, tr.count("WRONG"), tr.lines().toString());
      assertTrue(TIMEOUT_OR_ABORT.contains(tr.exception()), tr.end().text());
      assertTrue(tr.end().text().contains("waiting for rank " + victim), tr.end().text());
      if (tr.exception().equals("CommTimeoutException")) timeouts++;
    }
    assertTrue(timeouts >= 1, "the first survivor to give up reports a CommTimeoutException");
    sleep(timeoutMs + 500 - ms(System.nanoTime() - tStop)); // paused well beyond the timeout
    long tCont = System.nanoTime();
    ShmProbe.signal(workers.get(victim).pid(), "CONT");
    Worker.Trial resumed = workers.get(victim).collect("p", tCont + slackMs * 1_000_000L);
    assertNotNull(resumed.end(), "the resumed rank hangs: " + workers.get(victim).tail());
    assertEquals(0, resumed.count("WRONG"), resumed.lines().toString());
    assertTrue(TIMEOUT_OR_ABORT.contains(resumed.exception()), resumed.end().text());
    // all three processes, the paused one included, build a new communicator that works
    Path d2 = dir();
    for (int r = 0; r < n; r++) workers.get(r).send("RUN q " + d2 + " " + r + " " + n + " ALL_REDUCE TREE 8 10000 65536 50000 5");
    for (Worker w : workers) {
      Worker.Trial tr = w.collect("q", System.nanoTime() + 30_000_000_000L);
      assertTrue(tr.done(), w.tail());
    }
  }

  @Test
  void aCorruptedBarrierFlagIsAClearErrorNotAnUnsynchronizedRead() {
    try (RankGroup g = new RankGroup(2, opts(5_000))) {
      g.assertStillWorks();
      // rank 1's flag on rank 0 jumps far ahead while rank 1 is elsewhere: rank 0 must not pass its barrier
      Internals.ctrl(g.comm(0)).order(ByteOrder.nativeOrder()).putLong(Internals.slot(0, 1), 1_000_000L);
      List<Object> res = g.runCatching(r -> {
        if (r == 1) sleep(500);
        float[] x = new float[1000];
        Arrays.fill(x, r + 1);
        g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        return "returned " + x[0];
      });
      // the error names the corruption (waiting out the 5 s timeout would be a CommTimeoutException)
      for (int r = 0; r < 2; r++) {
        assertInstanceOf(CommException.class, res.get(r), "rank " + r + ": " + res.get(r));
        assertTrue(((Exception) res.get(r)).getMessage().contains("corrupted"), ((Exception) res.get(r)).getMessage());
      }
      assertTrue(g.comm(0).isAborted() && g.comm(1).isAborted());
      assertThrows(CommAbortedException.class, () -> g.comm(1).barrier());
    }
    try (RankGroup g = new RankGroup(2, opts(5_000))) {
      g.assertStillWorks(); // a new communicator afterwards works
    }
  }

  @Test
  void aFlagCorruptedOverAndOverDuringAChunkedCallGivesAnErrorNeverAWrongResult() {
    for (int trial = 0; trial < 5; trial++) {
      try (RankGroup g = new RankGroup(2, opts(3_000))) {
        g.assertStillWorks();
        ByteBuffer ctrl = Internals.ctrl(g.comm(0)).duplicate().order(ByteOrder.nativeOrder());
        int slot = Internals.slot(0, 1);
        AtomicBoolean stop = new AtomicBoolean();
        Thread storm = new Thread(() -> {
          sleep(2);
          while (!stop.get()) ctrl.putLong(slot, 1L << 40);
        });
        storm.start();
        List<Object> res;
        try {
          res = g.runCatching(r -> {
            float[] x = new float[400_000]; // 1.6 MB: 25 chunks of 64 KB, each ending with a barrier
            Arrays.fill(x, r + 1);
            g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
            for (float v : x) if (v != 3f) return "WRONG " + v;
            return "ok";
          });
        } finally {
          stop.set(true);
          join(storm);
        }
        for (int r = 0; r < 2; r++) {
          Object o = res.get(r);
          assertTrue("ok".equals(o) || (o instanceof CommException e && e.getMessage().contains("corrupted")),
              "rank " + r + ": " + o);
        }
      }
    }
  }

  @Test
  void aRankThatClosesWhilePeersStillCallMakesThemFailFast() {
    long timeoutMs = 30_000;
    try (RankGroup g = new RankGroup(3, opts(timeoutMs))) {
      g.assertStillWorks();
      List<Object> res = g.runCatching(r -> {
        if (r == 2) {
          sleep(300); // the others are waiting for rank 2 by now
          g.comm(2).close();
          return "closed";
        }
        g.comm(r).allReduce(HostTensor.of(new float[1000]), ReduceOp.SUM);
        return "returned";
      });
      // they fail on rank 2's close notice, not on the 30 s timeout (that would be a CommTimeoutException)
      for (int r = 0; r < 2; r++) {
        assertInstanceOf(CommAbortedException.class, res.get(r), "rank " + r + ": " + res.get(r));
        assertTrue(((Exception) res.get(r)).getMessage().contains("rank 2 closed"), ((Exception) res.get(r)).getMessage());
      }
      assertThrows(IllegalStateException.class, () -> g.comm(2).barrier());
      // and a rank that closed before its peers' next call: they fail at once too
      List<Object> again = g.runCatching(r -> {
        if (r == 2) return "closed";
        g.comm(r).barrier();
        return "returned";
      });
      for (int r = 0; r < 2; r++) assertInstanceOf(CommAbortedException.class, again.get(r));
    }
    try (RankGroup g = new RankGroup(3, opts(timeoutMs))) {
      g.assertStillWorks();
    }
  }

  @Test
  void closingAfterTheLastCallNeverDisturbsPeersFinishingIt() {
    try (RankGroup g = new RankGroup(3, opts(10_000))) {
      for (int round = 0; round < 50; round++) {
        final int k = round;
        List<Object> res = g.run(r -> {
          float[] x = new float[1 + k * 997];
          Arrays.fill(x, r + 1);
          g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
          return x[x.length - 1];
        });
        res.forEach(v -> assertEquals(6f, (float) v));
      }
      // rank 0 closes right after the final call while ranks 1 and 2 may still be in its end barrier
      List<Object> res = g.run(r -> {
        float[] x = new float[100_000];
        Arrays.fill(x, 1);
        g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        if (r == 0) g.comm(0).close();
        return x[99_999];
      });
      res.forEach(v -> assertEquals(3f, (float) v));
    }
  }

  @Test
  void ranksOutOfStepGetAMismatchAndAMissingRankATimeoutNamingIt() {
    try (RankGroup g = new RankGroup(2, opts(1_500))) {
      // rank 1 skips a barrier: its next call meets rank 0's barrier
      List<Object> res = g.runCatching(r -> {
        if (r == 0) g.comm(0).barrier();
        else g.comm(1).allReduce(HostTensor.of(new float[4]), ReduceOp.SUM);
        return null;
      });
      res.forEach(e -> assertInstanceOf(CommMismatchException.class, e));
      assertTrue(((Exception) res.get(0)).getMessage().contains("barrier"), ((Exception) res.get(0)).getMessage());
      g.assertStillWorks();
      // rank 1 skips a barrier and then stops calling: rank 0 times out naming it
      res = g.runCatching(r -> {
        if (r == 0) g.comm(0).barrier();
        return null;
      });
      assertTrue(((Exception) res.get(0)).getMessage().contains("waiting for rank 1"), String.valueOf(res.get(0)));
    }
  }


  static void join(Thread t) {
    try {
      t.join();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static void sleep(long ms) {
    if (ms <= 0) return;
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
