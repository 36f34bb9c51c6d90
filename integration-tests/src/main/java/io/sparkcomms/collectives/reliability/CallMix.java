package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.AllToAllVReference;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CollectiveChecker.Shape;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.host.AllToAllVHarness;
import java.util.SplittableRandom;

/**
 * Random checked collectives. Every choice comes from {@code rnd}, which every rank seeds alike and
 * consumes alike, so all ranks make the same calls; each rank checks its own output against the
 * float64 reference of {@link CollectiveChecker} (inputs are pure functions of seed, call, rank, i).
 */
final class CallMix {
  private CallMix() {}

  private static final DataType[] LP_TYPES = {DataType.FLOAT32, DataType.BFLOAT16};
  private static final ReduceOp[] OPS = ReduceOp.examples();

  /** Log-uniform in 1..max: most calls small, some chunked. */
  static int logUniform(SplittableRandom rnd, int max) {
    if (max <= 1) return 1;
    int v = (int) Math.exp(rnd.nextDouble() * Math.log(max + 1.0));
    return Math.max(1, Math.min(max, v));
  }

  static DataType dtype(SplittableRandom rnd, boolean lpOnly) {
    return lpOnly ? LP_TYPES[rnd.nextInt(LP_TYPES.length)] : DataType.values()[rnd.nextInt(DataType.values().length)];
  }

  static ReduceOp op(SplittableRandom rnd, DataType dt, boolean lpOnly) {
    if (lpOnly) return rnd.nextBoolean() ? ReduceOp.SUM : ReduceOp.AVG;
    while (true) {
      ReduceOp op = OPS[rnd.nextInt(OPS.length)];
      if (op.supports(dt)) return op;
    }
  }

  static Shape shape(SplittableRandom rnd, DataType dt) {
    int k = rnd.nextInt(4);
    if (k == 3 && (dt == DataType.FLOAT32 || dt == DataType.BFLOAT16 || dt == DataType.FLOAT64)) return Shape.SPANNING;
    if (k == 2 && dt.isFloating()) return Shape.NORMAL;
    return Shape.UNIFORM;
  }

  /**
   * One checked call of {@code kind}. {@code lpOnly}: pick only FP8-eligible dtypes and ops (for a
   * communicator forced to LP). {@code maxElems} bounds the largest buffer of the call.
   * Returns a short description of the call.
   */
  static String call(CollectiveChecker ck, Communicator c, Collective kind, boolean lpOnly, SplittableRandom rnd, int maxElems) {
    int n = c.size();
    switch (kind) {
      case ALL_REDUCE: {
        DataType dt = dtype(rnd, lpOnly);
        ReduceOp op = op(rnd, dt, lpOnly);
        int count = logUniform(rnd, maxElems);
        boolean inPlace = rnd.nextInt(4) == 0;
        Shape s = shape(rnd, dt);
        Protocol a = ck.allReduce(dt, op, count, inPlace, s);
        return "allReduce " + dt + " " + op + " " + count + " " + a;
      }
      case REDUCE_SCATTER: {
        DataType dt = dtype(rnd, lpOnly);
        ReduceOp op = op(rnd, dt, lpOnly);
        int count = logUniform(rnd, Math.max(1, maxElems / n));
        Shape s = shape(rnd, dt);
        Protocol a = ck.reduceScatter(dt, op, count, s);
        return "reduceScatter " + dt + " " + op + " " + count + " " + a;
      }
      case ALL_GATHER: {
        DataType dt = dtype(rnd, lpOnly);
        int count = logUniform(rnd, Math.max(1, maxElems / n));
        Shape s = shape(rnd, dt);
        Protocol a = ck.allGather(dt, count, s);
        return "allGather " + dt + " " + count + " " + a;
      }
      case ALL_TO_ALL: {
        DataType dt = dtype(rnd, lpOnly);
        int count = logUniform(rnd, Math.max(1, maxElems / n));
        Shape s = shape(rnd, dt);
        Protocol a = ck.allToAll(dt, count, s);
        return "allToAll " + dt + " " + count + " " + a;
      }
      case BROADCAST: {
        DataType dt = dtype(rnd, false);
        int count = logUniform(rnd, maxElems);
        int root = rnd.nextInt(n);
        boolean inPlace = rnd.nextInt(4) == 0;
        ck.broadcast(dt, count, root, inPlace);
        return "broadcast " + dt + " " + count + " root " + root;
      }
      case BARRIER:
        c.barrier();
        return "barrier";
      case ALL_TO_ALL_V: {
        // skewed per-peer counts (zeros, one receiver of everything, Zipf), packed or slot layout;
        // checked element by element (and guards) against AllToAllVReference
        DataType dt = new DataType[] {DataType.FLOAT32, DataType.INT64, DataType.BFLOAT16}[rnd.nextInt(3)];
        long[] totals = new long[n];
        for (int i = 0; i < n; i++) totals[i] = rnd.nextInt(Math.min(maxElems, 1 << 19) + 1);  // float32 codes need index < 1M
        var skew = AllToAllVReference.Skew.values()[rnd.nextInt(AllToAllVReference.Skew.values().length)];
        long[][] counts = AllToAllVReference.skewedCounts(totals, skew, rnd.nextLong());
        long seed = rnd.nextLong();
        boolean slots = rnd.nextBoolean();
        AllToAllVHarness.Scenario sc = slots ? AllToAllVHarness.slots("mix", dt, counts, 3, seed, rnd.nextBoolean(), rnd.nextBoolean())
            : AllToAllVHarness.packed("mix", dt, counts, 3, seed, rnd.nextBoolean(), rnd.nextBoolean());
        ck.failures().addAll(AllToAllVHarness.runValid(c, sc));
        return "allToAllV " + dt + " " + skew + (slots ? " slots" : " packed") + " totals " + java.util.Arrays.toString(totals);
      }
      default:
        throw new AssertionError(kind);
    }
  }
}
