package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import io.sparkcomms.collectives.rendezvous.RendezvousException;
import java.time.Duration;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

/** Bad input and failures: a clear exception on every rank, never a hang. */
class FailureTest {
  static CommOptions opts(long timeoutMs) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(timeoutMs)).build();
  }

  /** Runs f on 3 ranks; every rank must throw; returns the exceptions; then checks the comm still works. */
  private static List<Object> everyRankThrows(RankGroup g, IntFunction<Object> f) {
    List<Object> res = g.runCatching(f);
    for (int r = 0; r < res.size(); r++) assertInstanceOf(RuntimeException.class, res.get(r), "rank " + r + " did not raise");
    return res;
  }


  @Test
  void ranksDisagreeingOnCountDtypeOpOrRootRaiseEverywhereAndCommStaysUsable() {
    try (RankGroup g = new RankGroup(3, opts(10_000))) {
      List<Object> res = everyRankThrows(g, r -> {
        float[] x = new float[r == 1 ? 8 : 7];
        g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        return null;
      });
      res.forEach(e -> assertInstanceOf(CommMismatchException.class, e));
      assertTrue(((Exception) res.get(0)).getMessage().contains("count=8"), ((Exception) res.get(0)).getMessage());
      g.assertStillWorks();
      everyRankThrows(g, r -> {
        Tensor t = r == 2 ? HostTensor.of(new double[4]) : HostTensor.of(new float[4]);
        g.comm(r).allReduce(t, ReduceOp.SUM);
        return null;
      });
      g.assertStillWorks();
      everyRankThrows(g, r -> {
        g.comm(r).allReduce(HostTensor.of(new float[4]), r == 0 ? ReduceOp.MAX : ReduceOp.SUM);
        return null;
      });
      everyRankThrows(g, r -> {
        g.comm(r).broadcast(HostTensor.of(new float[4]), r == 0 ? 1 : 0);
        return null;
      });
      everyRankThrows(g, r -> {
        if (r == 1) g.comm(r).allGather(HostTensor.of(new float[4]), HostTensor.of(new float[12]));
        else g.comm(r).allReduce(HostTensor.of(new float[4]), ReduceOp.SUM);
        return null;
      });
      g.assertStillWorks();
    }
  }

  @Test
  void localArgumentErrorsRaiseOnEveryRank() {
    try (RankGroup g = new RankGroup(3, opts(10_000))) {
      // output too small on rank 1 only
      List<Object> res = everyRankThrows(g, r -> {
        g.comm(r).allGather(HostTensor.of(new float[4]), HostTensor.of(new float[r == 1 ? 11 : 12]));
        return null;
      });
      assertInstanceOf(IllegalArgumentException.class, res.get(1));
      assertInstanceOf(CommMismatchException.class, res.get(0));
      assertTrue(((Exception) res.get(0)).getMessage().contains("rank 1 rejected"), ((Exception) res.get(0)).getMessage());
      // null tensor on rank 2
      res = everyRankThrows(g, r -> {
        g.comm(r).allReduce(r == 2 ? null : HostTensor.of(new float[4]), HostTensor.of(new float[4]), ReduceOp.SUM);
        return null;
      });
      assertTrue(((Exception) res.get(2)).getMessage().contains("null"));
      // PREMUL_SUM on integers, everywhere
      everyRankThrows(g, r -> {
        g.comm(r).allReduce(HostTensor.of(new int[4]), ReduceOp.premulSum(2));
        return null;
      });
      // root out of range on one rank
      everyRankThrows(g, r -> {
        g.comm(r).broadcast(HostTensor.of(new float[4]), r == 0 ? 7 : 0);
        return null;
      });
      // a read-only output buffer on rank 0
      res = everyRankThrows(g, r -> {
        java.nio.ByteBuffer out = java.nio.ByteBuffer.allocateDirect(16);
        g.comm(r).allReduce(HostTensor.of(new float[4]), HostTensor.wrap(r == 0 ? out.asReadOnlyBuffer() : out, io.sparkcomms.collectives.DataType.FLOAT32), ReduceOp.SUM);
        return null;
      });
      assertInstanceOf(IllegalArgumentException.class, res.get(0));
      assertTrue(((Exception) res.get(0)).getMessage().contains("read-only"), ((Exception) res.get(0)).getMessage());
      assertInstanceOf(CommMismatchException.class, res.get(1));
      // allToAll count not divisible by size
      everyRankThrows(g, r -> {
        g.comm(r).allToAll(HostTensor.of(new float[4]), HostTensor.of(new float[4]));
        return null;
      });
      g.assertStillWorks();
    }
  }

  @Test
  void countsBeyondTheStagingAreaAreChunked() {
    try (RankGroup g = new RankGroup(2, opts(10_000))) {
      int n = 100_000; // 400 KB of floats, staging is 64 KB
      List<Object> out = g.run(r -> {
        float[] x = new float[n];
        java.util.Arrays.fill(x, r + 1);
        g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        for (float v : x) if (v != 3f) return "wrong " + v;
        return "ok";
      });
      out.forEach(o -> assertEquals("ok", o));
    }
  }

  @Test
  void aRankThatNeverArrivesTimesOutEverywhereElse() {
    try (RankGroup g = new RankGroup(3, opts(1500))) {
      List<Object> res = g.runCatching(r -> {
        if (r == 2) return "absent";
        g.comm(r).allReduce(HostTensor.of(new float[16]), ReduceOp.SUM);
        return "returned";
      });
      for (int r = 0; r < 2; r++) {
        Object e = res.get(r);
        assertTrue(e instanceof CommTimeoutException || e instanceof CommAbortedException, String.valueOf(e));
        assertTrue(((Exception) e).getMessage().contains("rank 2"), ((Exception) e).getMessage());
      }
      // the communicator is aborted on every rank, including the absent one
      for (int r = 0; r < 3; r++) {
        Communicator c = g.comm(r);
        assertTrue(c.isAborted());
        assertThrows(CommAbortedException.class, c::barrier);
      }
    }
  }

  @Test
  void abortOnOneRankWakesTheOthers() {
    try (RankGroup g = new RankGroup(3, opts(60_000))) {
      List<Object> res = g.runCatching(r -> {
        if (r == 0) {
          sleep(300);
          g.comm(0).abort("user abort for test");
          return "aborted";
        }
        g.comm(r).barrier();
        return "returned";
      });
      // woken by the abort: an aborted exception with its reason (the 60 s timeout would be a CommTimeoutException)
      for (int r = 1; r < 3; r++) {
        assertInstanceOf(CommAbortedException.class, res.get(r));
        assertTrue(((Exception) res.get(r)).getMessage().contains("user abort for test"));
      }
    }
  }

  @Test
  void useAfterCloseIsAClearError() {
    RankGroup g = new RankGroup(2, opts(5000));
    g.close();
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> g.comm(0).allReduce(HostTensor.of(new float[1]), ReduceOp.SUM));
    assertTrue(e.getMessage().contains("closed"));
    g.comm(0).close(); // idempotent
  }

  @Test
  void rendezvousWithAMissingRankTimesOut() {
    InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
    RendezvousException e = assertThrows(RendezvousException.class,
        () -> HostCommunicator.create(grp.member(0), opts(500)));
    assertTrue(e.getMessage().contains("rank(s) 1"), e.getMessage());
  }

  @Test
  void asyncWorkCompletesInOrderAndReportsFailures() {
    try (RankGroup g = new RankGroup(2, opts(10_000))) {
      List<Object> res = g.run(r -> {
        Communicator c = g.comm(r);
        float[] a = {1}, b = {10};
        Work w1 = c.allReduceAsync(HostTensor.of(a), HostTensor.of(a), ReduceOp.SUM);
        Work w2 = c.allReduceAsync(HostTensor.of(b), HostTensor.of(b), ReduceOp.SUM);
        assertTrue(w2.waitFor(Duration.ofSeconds(20)));
        assertTrue(w1.isCompleted());
        c.barrier(); // a sync call after async ones
        return a[0] + b[0];
      });
      res.forEach(x -> assertEquals(22f, (float) x));
      List<Object> errs = g.runCatching(r -> {
        Work w = g.comm(r).allReduceAsync(HostTensor.of(new float[r + 1]), HostTensor.of(new float[r + 1]), ReduceOp.SUM);
        w.waitFor();
        return null;
      });
      errs.forEach(e -> assertInstanceOf(CommMismatchException.class, e));
      g.assertStillWorks();
      assertFalse(g.comm(0).isAborted());
    }
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
