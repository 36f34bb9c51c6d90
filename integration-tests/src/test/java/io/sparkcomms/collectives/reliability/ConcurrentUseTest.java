package io.sparkcomms.collectives.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Work;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * One communicator used from several threads of one rank. A communicator admits one caller at a time:
 * a thread that calls while another thread is inside a call gets IllegalStateException at once and
 * nothing of its call happens (so the ranks' k-th calls still meet, and a thread that retries later is
 * served correctly). Threads sharing a communicator must agree on the order of their calls themselves.
 *
 * <p>Reentrancy: the host backend's {@link Work} has no completion callbacks, so a collective cannot be
 * called from inside one; the reentrant patterns that exist — a sync call while async calls are pending,
 * abort() from another thread during a call, an interrupt, close() racing abort() — are tested here.
 */
class ConcurrentUseTest {
  static CommOptions opts(long timeoutMs) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(timeoutMs)).build();
  }

  /** Runs body(rank, thread) on T threads per rank at once; returns the results by [rank][thread]. */
  private static Object[][] threads(RankGroup g, int perRank, java.util.function.BiFunction<Integer, Integer, Object> body) {
    Object[][] res = new Object[g.size()][perRank];
    List<Thread> ts = new ArrayList<>();
    for (int r = 0; r < g.size(); r++) {
      for (int t = 0; t < perRank; t++) {
        final int rank = r, th = t;
        Thread x = new Thread(() -> {
          try {
            res[rank][th] = body.apply(rank, th);
          } catch (Throwable e) {
            res[rank][th] = e;
          }
        });
        ts.add(x);
        x.start();
      }
    }
    for (Thread x : ts) {
      try {
        x.join(120_000);
      } catch (InterruptedException e) {
        throw new AssertionError(e);
      }
      assertTrue(!x.isAlive(), "a thread hangs");
    }
    return res;
  }

  @Test
  void threadsThatShareACommunicatorAreAdmittedOneAtATimeAndEveryAdmittedCallIsRight() {
    int calls = 150;
    try (RankGroup g = new RankGroup(2, opts(20_000))) {
      // rank 0: two threads, each retrying a refused call until it is admitted; rank 1: one thread
      // making as many calls as rank 0's two together. Rank 0 thread t contributes t+1 and rank 1
      // contributes 10, so every result names the rank-0 thread whose input it reduced.
      int[] refused = new int[2];
      Object[][] res = threads(g, 2, (r, t) -> {
        if (r == 1 && t == 1) return "idle";
        Communicator c = g.comm(r);
        int mine = r == 0 ? calls : 2 * calls;
        for (int i = 0; i < mine; i++) {
          float[] x = new float[20_000]; // 80 KB: two chunks through the 64 KB staging area
          Arrays.fill(x, r == 0 ? t + 1 : 10);
          while (true) {
            try {
              if (r == 0 && t == 1 && i % 2 == 0) c.allReduceAsync(HostTensor.of(x), HostTensor.of(x), ReduceOp.SUM).waitFor();
              else c.allReduce(HostTensor.of(x), ReduceOp.SUM);
              break;
            } catch (IllegalStateException e) {
              if (!e.getMessage().contains("one caller at a time")) return e;
              synchronized (refused) {
                refused[t]++;
              }
              Thread.onSpinWait();
            }
          }
          for (float v : x) if (v != x[0]) return "torn result " + Arrays.toString(Arrays.copyOf(x, 8));
          int s = (int) x[0];
          if (s != 11 && s != 12) return "impossible sum " + s;
          if (r == 0 && s != t + 11) return "rank 0 thread " + t + " got the result of its other thread's call: " + s;
        }
        return "ok";
      });
      assertEquals("ok", res[0][0], String.valueOf(res[0][0]));
      assertEquals("ok", res[0][1], String.valueOf(res[0][1]));
      assertEquals("ok", res[1][0], String.valueOf(res[1][0]));
      System.out.println("refused while the other thread was in a call: " + refused[0] + " + " + refused[1]);
      g.assertStillWorks();
    }
  }

  @Test
  void aSyncCallWhileAsyncCallsArePendingRunsAfterThem() {
    try (RankGroup g = new RankGroup(3, opts(20_000))) {
      List<Object> res = g.run(r -> {
        Communicator c = g.comm(r);
        float[][] xs = new float[5][];
        List<Work> ws = new ArrayList<>();
        for (int k = 0; k < 5; k++) {
          xs[k] = new float[1 + k * 20_000];
          Arrays.fill(xs[k], k + r);
          ws.add(c.allReduceAsync(HostTensor.of(xs[k]), HostTensor.of(xs[k]), ReduceOp.SUM));
        }
        double[] y = {r};
        c.allReduce(HostTensor.of(y), ReduceOp.MAX); // waits for the five async calls first
        for (Work w : ws) if (!w.isCompleted()) return "async call not completed before the sync one returned";
        for (int k = 0; k < 5; k++) if (xs[k][xs[k].length - 1] != 3 * k + 3) return "wrong async result " + k;
        return y[0] == 2 ? "ok" : "wrong " + y[0];
      });
      res.forEach(o -> assertEquals("ok", o));
    }
  }

  @Test
  void abortFromAnotherThreadWakesTheCallOnThisRank() {
    try (RankGroup g = new RankGroup(2, opts(60_000))) {
      Thread aborter = new Thread(() -> {
        PauseCorruptDetachTest.sleep(300);
        g.comm(0).abort("aborted by a watchdog thread");
      });
      aborter.start();
      // aborted with the watchdog's reason, not timed out after 60 s (a CommTimeoutException)
      RuntimeException e = assertThrows(CommAbortedException.class,
          () -> g.comm(0).allReduce(HostTensor.of(new float[8]), ReduceOp.SUM)); // rank 1 never calls
      assertTrue(e.getMessage().contains("watchdog"), e.getMessage());
      PauseCorruptDetachTest.join(aborter);
      RuntimeException e1 = assertThrows(CommAbortedException.class, () -> g.comm(1).barrier());
      assertTrue(e1.getMessage().contains("watchdog"), e1.getMessage());
    }
  }

  @Test
  void anInterruptedWaitAbortsPromptlyInsteadOfSpinningUntilTheTimeout() throws Exception {
    try (RankGroup g = new RankGroup(2, opts(60_000))) {
      Object[] got = new Object[1];
      Thread caller = new Thread(() -> {
        try {
          g.comm(0).allReduce(HostTensor.of(new float[8]), ReduceOp.SUM); // rank 1 never calls
          got[0] = "returned";
        } catch (RuntimeException e) {
          got[0] = e;
        }
        got[0] = new Object[] {got[0], Thread.currentThread().isInterrupted()};
      });
      caller.start();
      Thread.sleep(300);
      caller.interrupt();
      caller.join(60_000); // a hang guard: the communicator's own timeout is 60 s, the abort says "interrupted"
      assertTrue(!caller.isAlive(), "an interrupted rank keeps waiting");
      Object[] r = (Object[]) got[0];
      assertInstanceOf(CommAbortedException.class, r[0]);
      assertTrue(((Exception) r[0]).getMessage().contains("interrupted"), ((Exception) r[0]).getMessage());
      assertEquals(true, r[1], "the interrupt status is kept");
      RuntimeException e1 = assertThrows(CommAbortedException.class, () -> g.comm(1).barrier());
      assertTrue(e1.getMessage().contains("interrupted"), e1.getMessage());
    }
  }

  @Test
  void abortAndIsAbortedRacingCloseNeverTouchUnmappedMemory() throws Exception {
    // in a child JVM: before the fix this crashed the JVM with SIGSEGV within a few hundred iterations
    Process p = new ProcessBuilder(ShmProbe.javaBinary(), "-Xmx128m", "-cp", System.getProperty("java.class.path"),
        AbortCloseRaceMain.class.getName(), "3000").redirectErrorStream(true).start();
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(p.waitFor(120, TimeUnit.SECONDS));
    assertEquals(0, p.exitValue(), out.length() > 2000 ? out.substring(0, 2000) : out);
    assertTrue(out.contains("OK 3000"), out);
  }
}
