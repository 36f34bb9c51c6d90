package io.sparkcomms.collectives.observe;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.nio.ByteBuffer;
import java.util.List;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;

/** The optional NaN check: a NaN on one rank fails the call on every rank, and the communicator goes on. */
class NanCheckTest {
  private static final CommOptions ON = CommOptions.builder().stagingBytes(1 << 16).nanCheck(true).build();

  @Test void bitPatternTestsAgreeWithTheDecodings() {
    int bf = 0, fp = 0;
    for (int b = 0; b < 65536; b++) {
      short s = (short) b;
      boolean bfNaN = Float.isNaN(HalfFloats.bf16ToFloat(s));
      boolean fpNaN = Float.isNaN(HalfFloats.fp16ToFloat(s));
      assertEquals(bfNaN, NanCheck.isBf16NaN(s), "bf16 bits " + Integer.toHexString(b));
      assertEquals(fpNaN, NanCheck.isFp16NaN(s), "fp16 bits " + Integer.toHexString(b));
      if (bfNaN) bf++;
      if (fpNaN) fp++;
    }
    assertEquals(2 * 127, bf, "bf16: 7 mantissa bits, both signs, mantissa non-zero");
    assertEquals(2 * 1023, fp, "fp16: 10 mantissa bits, both signs, mantissa non-zero");
  }

  /** The first NaN of every floating dtype, over arrays and direct buffers; infinities and integers never. */
  @Test void firstNaNOfEveryFloatingTypeAndStorage() {
    for (DataType dt : DataType.values()) {
      for (boolean direct : new boolean[] {false, true}) {
        HostTensor t = tensor(dt, 9, direct);
        for (int i = 0; i < 9; i++) t.setDouble(i, i == 1 ? Double.POSITIVE_INFINITY : i == 2 ? Double.NEGATIVE_INFINITY : i);
        assertEquals(-1, NanCheck.firstNaN(t), dt + " direct=" + direct + ": infinities are not NaN");
        if (!dt.isFloating()) continue;
        t.setDouble(7, Double.NaN);
        t.setDouble(5, -Double.NaN);
        assertEquals(5, NanCheck.firstNaN(t), dt + " direct=" + direct);
      }
    }
    assertEquals(-1, NanCheck.firstNaN(HostTensor.of(new float[0])));
  }

  private static HostTensor tensor(DataType dt, int n, boolean direct) {
    if (!direct) return HostTensor.allocate(dt, n);
    return HostTensor.wrap(ByteBuffer.allocateDirect(n * dt.size()), dt);
  }

  /** nanCheck on, rank 1 holds a NaN: its allReduce raises IllegalArgumentException, rank 0's CommMismatchException; then usable. */
  @Test void aNaNOnOneRankFailsTheAllReduceOnEveryRank() {
    try (RankGroup g = new RankGroup(2, ON)) {
      List<Object> res = g.runCatching(r -> {
        float[] x = {1, 2, r == 1 ? Float.NaN : 3, 4};
        g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        return x;
      });
      IllegalArgumentException own = assertInstanceOf(IllegalArgumentException.class, res.get(1));
      assertTrue(own.getMessage().contains("allReduce: input element 2 of rank 1 is NaN"), own.getMessage());
      CommMismatchException peer = assertInstanceOf(CommMismatchException.class, res.get(0));
      assertTrue(peer.getMessage().contains("rank 1 rejected its arguments: allReduce: input element 2 of rank 1 is NaN"), peer.getMessage());
      g.assertStillWorks();
    }
  }

  /** The same for the other scanned collectives, on 3 ranks, sync and async, full and half precision. */
  @Test void everyScannedCollectiveFailsOnEveryRank() {
    try (RankGroup g = new RankGroup(3, ON)) {
      int n = 3;
      expectEveryRankFails(g, 2, (c, nan) -> c.reduceScatter(withNaN(new double[2 * n], nan), HostTensor.of(new double[2]), ReduceOp.SUM));
      expectEveryRankFails(g, 0, (c, nan) -> c.allGather(withNaN(new double[2], nan), HostTensor.of(new double[2 * n])));
      expectEveryRankFails(g, 1, (c, nan) -> c.allToAll(withNaN(new double[n], nan), HostTensor.of(new double[n])));
      expectEveryRankFails(g, 0, (c, nan) -> c.broadcast(withNaN(new double[3], nan), 0));
      expectEveryRankFails(g, 2, (c, nan) -> c.allReduceAsync(bf16(nan), bf16(false), ReduceOp.SUM).waitFor());
      expectEveryRankFails(g, 1, (c, nan) -> c.allReduce(fp16(nan), fp16(false), ReduceOp.MAX));
      // broadcast reads the root's input only: a NaN elsewhere is no problem
      List<double[]> got = g.run(r -> {
        double[] x = {r == 1 ? Double.NaN : 5, 6};
        g.comm(r).broadcast(HostTensor.of(x), 0);
        return x;
      });
      for (double[] x : got) assertArrayEquals(new double[] {5, 6}, x);
      // integer types are never scanned
      g.run(r -> {
        g.comm(r).allReduce(HostTensor.of(new int[] {r}), ReduceOp.SUM);
        return null;
      });
      g.assertStillWorks();
    }
  }

  private static HostTensor withNaN(double[] x, boolean nan) {
    if (nan) x[x.length - 1] = Double.NaN;
    return HostTensor.of(x);
  }

  private static HostTensor bf16(boolean nan) {
    short[] s = {HalfFloats.floatToBf16(1f), HalfFloats.floatToBf16(nan ? Float.NaN : 2f)};
    return HostTensor.bf16(s);
  }

  private static HostTensor fp16(boolean nan) {
    short[] s = {HalfFloats.floatToFp16(nan ? Float.NaN : 1f), HalfFloats.floatToFp16(2f)};
    return HostTensor.fp16(s);
  }

  /** {@code call(comm, nanHere)} on every rank, a NaN on rank {@code bad} only: IllegalArgumentException there, mismatch elsewhere. */
  private static void expectEveryRankFails(RankGroup g, int bad, BiConsumer<Communicator, Boolean> call) {
    List<Object> res = g.runCatching(r -> {
      call.accept(g.comm(r), r == bad);
      return "no failure";
    });
    for (int r = 0; r < g.size(); r++) {
      if (r == bad) {
        IllegalArgumentException e = assertInstanceOf(IllegalArgumentException.class, res.get(r), "rank " + r);
        assertTrue(e.getMessage().contains("of rank " + bad + " is NaN (nanCheck is on)"), e.getMessage());
      } else {
        CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(r), "rank " + r);
        assertTrue(e.getMessage().contains("rank " + bad + " rejected its arguments"), e.getMessage());
      }
    }
  }

  /** nanCheck off (the default): the NaN is reduced like any value. */
  @Test void withTheCheckOffNaNIsReducedAsUsual() {
    assertEquals(false, CommOptions.defaults().nanCheck());
    try (RankGroup g = new RankGroup(2, ON.toBuilder().nanCheck(false).build())) {
      List<float[]> out = g.run(r -> {
        float[] x = {r == 1 ? Float.NaN : 1, 2};
        g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
        return x;
      });
      for (float[] x : out) {
        assertTrue(Float.isNaN(x[0]));
        assertEquals(4f, x[1]);
      }
    }
  }
}
