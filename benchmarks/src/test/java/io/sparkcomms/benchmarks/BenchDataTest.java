package io.sparkcomms.benchmarks;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import org.junit.jupiter.api.Test;

/**
 * The layouts and checks of reduce, gather, scatter, allgatherv and reducescatterv, in one process:
 * outputs built from the definitions in Communicator's Javadoc pass the check, and one changed
 * element fails it.
 */
class BenchDataTest {
  private static final long SEED = 12345;
  private static final DataType DT = DataType.FLOAT32;

  @Test
  void perRankCountsAreProportionalToRankPlusOneAndAddUp() {
    assertArrayEquals(new long[] {85, 171}, BenchData.perRankCounts(256, 2));
    assertArrayEquals(new long[] {0, 1}, BenchData.perRankCounts(1, 2));
    assertArrayEquals(new long[] {1, 2, 3, 4}, BenchData.perRankCounts(10, 4));
    assertArrayEquals(new long[] {0, 0, 1}, BenchData.perRankCounts(1, 3));
    for (int n = 1; n <= 64; n++) {
      for (long t : new long[] {1, 7, 1000, 1L << 28}) {
        long[] c = BenchData.perRankCounts(t, n);
        long sum = 0;
        for (int r = 0; r < n; r++) {
          double share = (double) t * (r + 1) / ((double) n * (n + 1) / 2);
          assertTrue(c[r] >= 0 && Math.abs(c[r] - share) < 1, "n " + n + ", total " + t + ", rank " + r + ": " + c[r]);
          sum += c[r];
        }
        assertEquals(t, sum, "n " + n + ", total " + t);
      }
    }
  }

  @Test
  void layoutsGiveEachRankItsCounts() {
    BenchData.Layout g0 = BenchData.Layout.of(Collective.GATHER, 1000, DT, 3, 0, 1);
    BenchData.Layout g1 = BenchData.Layout.of(Collective.GATHER, 1000, DT, 3, 1, 1);
    assertEquals(83, g0.inCount());
    assertEquals(0, g0.outCount(), "a non-root's gather output is not used");
    assertEquals(249, g1.outCount());
    assertEquals(996, g1.bytes());
    BenchData.Layout s0 = BenchData.Layout.of(Collective.SCATTER, 1000, DT, 3, 0, 1);
    assertEquals(0, s0.inCount(), "a non-root's scatter input is not used");
    assertEquals(83, s0.outCount());
    BenchData.Layout rd = BenchData.Layout.of(Collective.REDUCE, 1000, DT, 3, 2, 0);
    assertEquals(250, rd.inCount());
    assertEquals(0, rd.outCount());
    BenchData.Layout v = BenchData.Layout.of(Collective.REDUCE_SCATTER_V, 40, DT, 4, 3, 0);
    assertEquals(10, v.inCount());
    assertEquals(4, v.outCount());
    assertEquals(40, v.bytes());
    BenchData.Layout a = BenchData.Layout.of(Collective.ALL_GATHER_V, 40, DT, 4, 0, 0);
    assertEquals(1, a.inCount());
    assertEquals(10, a.outCount());
    assertNull(BenchData.Layout.of(Collective.GATHER, 8, DT, 3, 0, 0), "under one element per rank");
  }

  @Test
  void checksAcceptTheDefinitionsAndCatchAChangedElement() {
    int n = 3;
    for (Collective c : new Collective[] {Collective.REDUCE, Collective.GATHER, Collective.SCATTER, Collective.ALL_GATHER_V,
        Collective.REDUCE_SCATTER_V}) {
      int root = 1;
      ReduceOp op = c == Collective.REDUCE || c == Collective.REDUCE_SCATTER_V ? ReduceOp.SUM : null;
      for (int rank = 0; rank < n; rank++) {
        BenchData.Layout l = BenchData.Layout.of(c, 4 * 100, DT, n, rank, root);
        HostTensor out = expected(c, l, rank, n, root, op);
        String what = c + " rank " + rank;
        BenchData.Check ok = BenchData.check(c, out, l, SEED, rank, n, DT, op, false, root);
        assertEquals(0, ok.wrong(), what + ": " + ok.firstWrong());
        if (l.outCount() == 0) continue;
        int j = l.outCount() - 1;
        out.setDouble(j, out.getDouble(j) + 0.25);
        BenchData.Check bad = BenchData.check(c, out, l, SEED, rank, n, DT, op, false, root);
        assertEquals(1, bad.wrong(), what);
        assertTrue(bad.maxRelErr() > 0.01, what);
        BenchData.poison(out);
        assertEquals(l.outCount(), BenchData.check(c, out, l, SEED, rank, n, DT, op, false, root).wrong(), what + ": unwritten");
      }
    }
  }

  /** Rank {@code rank}'s output of {@code c}, computed from every rank's input as the API defines it. */
  private static HostTensor expected(Collective c, BenchData.Layout l, int rank, int n, int root, ReduceOp op) {
    HostTensor[] in = new HostTensor[n];
    for (int r = 0; r < n; r++) {
      BenchData.Layout lr = BenchData.Layout.of(c, l.bytes(), DT, n, r, root);
      in[r] = HostTensor.allocate(DT, lr.inCount());
      BenchData.fill(in[r], SEED, r, op);
    }
    HostTensor out = HostTensor.allocate(DT, l.outCount());
    long start = 0;
    for (int r = 0; r < rank && l.counts() != null; r++) start += l.counts().count(r);
    for (int j = 0; j < l.outCount(); j++) {
      double v;
      switch (c) {
        case REDUCE: {
          float s = 0;
          for (int r = 0; r < n; r++) s += (float) in[r].getDouble(j);
          v = s;
          break;
        }
        case REDUCE_SCATTER_V: {
          float s = 0;
          for (int r = 0; r < n; r++) s += (float) in[r].getDouble(start + j);
          v = s;
          break;
        }
        case GATHER: v = in[j / l.chunk()].getDouble(j % l.chunk()); break;
        case SCATTER: v = in[root].getDouble((long) rank * l.chunk() + j); break;
        default: {  // ALL_GATHER_V: the ranks' inputs back to back
          int p = 0;
          long off = j;
          while (off >= in[p].count()) off -= in[p++].count();
          v = in[p].getDouble(off);
        }
      }
      out.setDouble(j, v);
    }
    return out;
  }
}
