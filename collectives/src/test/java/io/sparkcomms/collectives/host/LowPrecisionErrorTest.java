package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CollectiveChecker.Shape;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.lp.BlockQuantizer;
import io.sparkcomms.collectives.lp.Fp8Codec;
import io.sparkcomms.collectives.lp.Fp8Format;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Asserted error bounds of the FP8 collectives on N(0,1) data and on data spanning 1e-6..1e4, and the
 * exact result of the one-shot LP allReduce (up to {@link Thresholds#LP_ONESHOT_MAX_RANKS} ranks, the host default).
 */
class LowPrecisionErrorTest {
  static CommOptions lp(Fp8Format f) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).algorithm(Algorithm.LP).fp8Format(f)
        .stagingBytes(1 << 20).build();
  }

  @ParameterizedTest
  @EnumSource(Fp8Format.class)
  void elementBoundsHoldOnNormalAndSpanningData(Fp8Format f) {
    for (int n : new int[] {2, 4}) elementBoundsHold(f, n); // one-shot and two-shot allReduce
  }

  private static void elementBoundsHold(Fp8Format f, int n) {
    long seed = System.nanoTime();
    try (RankGroup g = new RankGroup(n, lp(f))) {
      List<List<String>> fails = g.run(r -> {
        CollectiveChecker ck = new CollectiveChecker(g.comm(r), seed);
        for (Shape s : new Shape[] {Shape.NORMAL, Shape.SPANNING}) {
          for (DataType dt : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
            assertEquals(Protocol.LP, ck.allReduce(dt, ReduceOp.SUM, 200_003, false, s));
            ck.allReduce(dt, ReduceOp.AVG, 7, false, s);
            ck.reduceScatter(dt, ReduceOp.SUM, 50_001, s);
            ck.allGather(dt, 50_001, s);
            ck.allToAll(dt, 50_001, s);
          }
        }
        return ck.failures();
      });
      fails.forEach(x -> assertTrue(x.isEmpty(), f + ", " + n + " ranks, seed " + seed + ": " + x));
    }
  }

  /** N(0,1) inputs of n ranks, representable in dt. */
  private static float[][] normal(int n, int count, DataType dt, long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    float[][] x = new float[n][count];
    for (float[] xr : x) {
      for (int i = 0; i < count; i++) {
        // Box-Muller; 1 - u avoids log(0)
        float v = (float) (Math.sqrt(-2 * Math.log(1 - rnd.nextDouble())) * Math.cos(2 * Math.PI * rnd.nextDouble()));
        xr[i] = dt == DataType.BFLOAT16 ? HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(v)) : v;
      }
    }
    return x;
  }

  private static HostTensor tensor(DataType dt, float[] x) {
    if (dt == DataType.FLOAT32) return HostTensor.of(x.clone());
    short[] b = new short[x.length];
    for (int i = 0; i < x.length; i++) b[i] = HalfFloats.floatToBf16(x[i]);
    return HostTensor.bf16(b);
  }

  /** allReduce of x[r] on every rank, outputs poisoned with NaN first; the outputs by rank. */
  private static List<HostTensor> allReduce(RankGroup g, float[][] x, DataType dt, ReduceOp op) {
    return g.run(r -> {
      HostTensor out = HostTensor.allocate(dt, x[r].length);
      for (int i = 0; i < x[r].length; i++) out.setDouble(i, Double.NaN);
      long lp = g.comm(r).stats().calls(Protocol.LP);
      g.comm(r).allReduce(tensor(dt, x[r]), out, op);
      assertEquals(lp + 1, g.comm(r).stats().calls(Protocol.LP), "the call ran LP");
      return out;
    });
  }

  /**
   * The one-shot LP allReduce, emulated: every rank's whole input quantized once (blocks from element
   * 0) and dequantized, summed in float in rank order, AVG divided by n in float, rounded to dt.
   */
  static float[] oneShotEmulation(float[][] x, Fp8Format f, int blockSize, ReduceOp op, DataType dt) {
    int n = x.length, count = x[0].length;
    BlockQuantizer q = new BlockQuantizer(f, blockSize);
    ByteBuffer wire = ByteBuffer.allocate(BlockQuantizer.encodedBytes(count, blockSize));
    float[] sum = new float[count], deq = new float[count];
    for (int p = 0; p < n; p++) {
      q.quantize(x[p], 0, count, wire, 0);
      q.dequantize(wire, 0, count, p == 0 ? sum : deq, 0);
      if (p > 0) for (int i = 0; i < count; i++) sum[i] += deq[i];
    }
    for (int i = 0; i < count; i++) {
      float v = op.kind() == ReduceOp.Kind.AVG ? sum[i] / n : sum[i];
      sum[i] = dt == DataType.BFLOAT16 ? HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(v)) : v;
    }
    return sum;
  }

  /**
   * With 2 ranks the LP allReduce is one-shot: bit for bit the emulation (one quantization per
   * element), the same on both ranks, over many chunks (64 KiB staging) and with tails.
   */
  @ParameterizedTest
  @EnumSource(Fp8Format.class)
  void twoRankAllReduceMatchesOneShotEmulationBitForBit(Fp8Format f) {
    long seed = System.nanoTime();
    int n = 2;
    assertTrue(n <= Thresholds.LP_ONESHOT_MAX_RANKS);
    CommOptions o = lp(f).toBuilder().stagingBytes(64 << 10).build();
    try (RankGroup g = new RankGroup(n, o)) {
      for (int count : new int[] {1_000_003, 7, 1}) {
        for (DataType dt : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
          for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG}) {
            float[][] x = normal(n, count, dt, seed + count);
            float[] want = oneShotEmulation(x, f, Thresholds.lpBlockSize(o), op, dt);
            List<HostTensor> outs = allReduce(g, x, dt, op);
            for (int r = 0; r < n; r++) {
              for (int i = 0; i < count; i++) {
                int got = Float.floatToRawIntBits((float) outs.get(r).getDouble(i));
                if (got != Float.floatToRawIntBits(want[i])) {
                  throw new AssertionError(f + " " + dt + " " + op + " count " + count + " seed " + seed + ": rank " + r
                      + " element " + i + " is " + outs.get(r).getDouble(i) + ", emulation " + want[i]);
                }
              }
            }
          }
        }
      }
    }
  }

  /**
   * Relative L2 error of the LP allReduce (SUM, fp32) on N(0,1) against a float64 reference: one
   * quantization (one-shot, 2 ranks; or 3 ranks with lpOneShotMaxRanks 3) stays within 3%, two
   * quantizations (two-shot, 3 and 4 ranks) within 5%.
   */
  @Test
  void relativeL2ErrorOnNormalData() {
    int count = 1_000_003;
    long seed = System.nanoTime();
    int[][] cases = {{2, Thresholds.LP_ONESHOT_MAX_RANKS}, {3, Thresholds.LP_ONESHOT_MAX_RANKS},
        {4, Thresholds.LP_ONESHOT_MAX_RANKS}, {3, 3}};
    for (int[] c : cases) {
      int n = c[0];
      boolean oneShot = n <= c[1];
      float[][] x = normal(n, count, DataType.FLOAT32, seed + n);
      List<HostTensor> outs;
      try (RankGroup g = new RankGroup(n, lp(Fp8Format.E4M3FN).toBuilder().lpOneShotMaxRanks(c[1]).build())) {
        outs = allReduce(g, x, DataType.FLOAT32, ReduceOp.SUM);
      }
      double err = 0, norm = 0;
      for (int i = 0; i < count; i++) {
        double ref = 0;
        for (int r = 0; r < n; r++) ref += x[r][i];
        double got = outs.get(0).getDouble(i);
        err += (got - ref) * (got - ref);
        norm += ref * ref;
        for (int r = 1; r < n; r++) if (outs.get(r).getDouble(i) != got) throw new AssertionError("ranks differ at " + i);
      }
      double rel = Math.sqrt(err / norm);
      System.out.printf("LP allReduce E4M3FN, N(0,1), %d ranks, %s: relative L2 error %.4f%n", n, oneShot ? "one-shot" : "two-shot", rel);
      assertTrue(rel <= (oneShot ? 0.03 : 0.05), n + " ranks, " + (oneShot ? "one-shot" : "two-shot") + ", seed " + seed + ": relative L2 error " + rel);
    }
  }

  /**
   * On data whose magnitude sweeps 1e-6..1e4, per-block scaling keeps the RMS error relative to
   * sum|x| within a few percent everywhere, while a plain FP8 cast of the same values loses the small
   * ones entirely (they are below FP8's smallest subnormal).
   */
  @Test
  void blockScalingKeepsSmallValuesWherePlainCastLosesThem() {
    int n = 4, count = 100_000;
    Fp8Format f = Fp8Format.E4M3FN;
    SplittableRandom rnd = new SplittableRandom(System.nanoTime());
    float[][] x = new float[n][count];
    for (int r = 0; r < n; r++) {
      for (int i = 0; i < count; i++) {
        double mag = Math.pow(10, -6 + 10.0 * i / (count - 1)) * (0.5 + rnd.nextDouble());
        x[r][i] = (float) (rnd.nextBoolean() ? mag : -mag);
      }
    }
    float[][] out = new float[n][count];
    try (RankGroup g = new RankGroup(n, lp(f))) {
      g.run(r -> {
        g.comm(r).allReduce(HostTensor.of(x[r]), HostTensor.of(out[r]), ReduceOp.SUM);
        return null;
      });
    }
    double oursSmall = 0, castSmall = 0, oursAll = 0;
    int small = 0;
    for (int i = 0; i < count; i++) {
      double ref = 0, mag = 0, cast = 0;
      for (int r = 0; r < n; r++) {
        ref += x[r][i];
        mag += Math.abs(x[r][i]);
        cast += Fp8Codec.decode(Fp8Codec.encode(x[r][i], f), f);
      }
      double eOurs = (out[0][i] - ref) / mag;
      oursAll += eOurs * eOurs;
      if (mag < 1e-3) {
        small++;
        oursSmall += eOurs * eOurs;
        double eCast = (cast - ref) / mag;
        castSmall += eCast * eCast;
      }
      for (int r = 1; r < n; r++) assertEquals(Float.floatToIntBits(out[0][i]), Float.floatToIntBits(out[r][i]), "ranks differ at " + i);
    }
    double rmsOursSmall = Math.sqrt(oursSmall / small), rmsCastSmall = Math.sqrt(castSmall / small), rmsAll = Math.sqrt(oursAll / count);
    assertTrue(rmsAll < 0.03, "RMS error relative to sum|x| over all elements: " + rmsAll);
    assertTrue(rmsOursSmall < 0.03, "RMS relative error on values below 1e-3: " + rmsOursSmall);
    assertTrue(rmsCastSmall > 0.5, "a plain FP8 cast should lose values below 1e-3, RMS relative error " + rmsCastSmall);
  }
}
