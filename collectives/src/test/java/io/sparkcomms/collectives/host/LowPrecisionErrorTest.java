package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CollectiveChecker.Shape;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.lp.Fp8Codec;
import io.sparkcomms.collectives.lp.Fp8Format;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** Asserted error bounds of the FP8 collectives on N(0,1) data and on data spanning 1e-6..1e4. */
class LowPrecisionErrorTest {
  static CommOptions lp(Fp8Format f) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).algorithm(Algorithm.LP).fp8Format(f)
        .stagingBytes(1 << 20).build();
  }

  @ParameterizedTest
  @EnumSource(Fp8Format.class)
  void elementBoundsHoldOnNormalAndSpanningData(Fp8Format f) {
    long seed = System.nanoTime();
    try (RankGroup g = new RankGroup(4, lp(f))) {
      List<List<String>> fails = g.run(r -> {
        CollectiveChecker ck = new CollectiveChecker(g.comm(r), seed);
        for (Shape s : new Shape[] {Shape.NORMAL, Shape.SPANNING}) {
          for (DataType dt : new DataType[] {DataType.FLOAT32, DataType.BFLOAT16}) {
            assertEquals(Algorithm.LP, ck.allReduce(dt, ReduceOp.SUM, 200_003, false, s));
            ck.allReduce(dt, ReduceOp.AVG, 7, false, s);
            ck.reduceScatter(dt, ReduceOp.SUM, 50_001, s);
            ck.allGather(dt, 50_001, s);
            ck.allToAll(dt, 50_001, s);
          }
        }
        return ck.failures();
      });
      fails.forEach(x -> assertTrue(x.isEmpty(), f + " seed " + seed + ": " + x));
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
