package io.sparkcomms.collectives.plan;

import static io.sparkcomms.collectives.Algorithm.AUTO;
import static io.sparkcomms.collectives.Algorithm.FLAT;
import static io.sparkcomms.collectives.Algorithm.LP;
import static io.sparkcomms.collectives.Algorithm.TREE;
import static io.sparkcomms.collectives.Algorithm.VENDOR;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.gpu.DeviceTensor;
import org.junit.jupiter.api.Test;

/** The planning step both backends share: request normalization, argument and memory checks, counts. */
class CallPlannerTest {
  static final BackendOffer GPU = new BackendOffer(BackendOffer.Memory.DEVICE, 0, true, true, true);
  static final BackendOffer GPU_NO_VENDOR = new BackendOffer(BackendOffer.Memory.DEVICE, 0, false, true, true);
  static final BackendOffer NO_LP = new BackendOffer(BackendOffer.Memory.DEVICE, 0, true, false, true);

  static Algorithm norm(BackendOffer b, Collective c, DataType dt, ReduceOp op, Algorithm a) {
    return new CallPlanner(4, CommOptions.defaults(), b).normalize(c, dt, op, a);
  }

  @Test void lpFallsThroughToFullPrecisionWhereItCannotRun() {
    assertEquals(LP, norm(GPU, Collective.ALL_REDUCE, DataType.BFLOAT16, ReduceOp.AVG, LP));
    assertEquals(LP, norm(GPU, Collective.ALL_GATHER, DataType.FLOAT32, null, LP));
    assertEquals(AUTO, norm(GPU, Collective.ALL_REDUCE, DataType.FLOAT16, ReduceOp.SUM, LP), "fp16 has no FP8 path");
    assertEquals(AUTO, norm(GPU, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.MAX, LP), "MAX has no FP8 path");
    assertEquals(AUTO, norm(GPU, Collective.BROADCAST, DataType.FLOAT32, null, LP), "broadcast has no LP form");
    assertEquals(AUTO, norm(NO_LP, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, LP), "a backend without LP");
  }

  @Test void vendorNeedsTheVendorLibraryAndOnlyCollectivesItHas() {
    assertEquals(VENDOR, norm(GPU, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, VENDOR));
    assertEquals(VENDOR, norm(GPU, Collective.BROADCAST, DataType.FLOAT32, null, VENDOR));
    assertEquals(FLAT, norm(GPU, Collective.ALL_TO_ALL, DataType.FLOAT32, null, VENDOR), "no vendor all-to-all: direct");
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> norm(GPU_NO_VENDOR, Collective.ALL_GATHER, DataType.FLOAT32, null, VENDOR));
    assertTrue(e.getMessage().contains("VENDOR"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> norm(BackendOffer.HOST, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, VENDOR));
  }

  @Test void flatAndTreeOnlyMeanSomethingForAllReduce() {
    assertEquals(TREE, norm(GPU, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, TREE));
    assertEquals(FLAT, norm(GPU, Collective.ALL_REDUCE, DataType.FLOAT32, ReduceOp.SUM, FLAT));
    for (Collective c : new Collective[] {Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL, Collective.BROADCAST}) {
      assertEquals(FLAT, norm(GPU, c, DataType.FLOAT32, ReduceOp.SUM, TREE), c.apiName());
      assertEquals(FLAT, norm(GPU, c, DataType.FLOAT32, ReduceOp.SUM, FLAT), c.apiName());
      assertEquals(AUTO, norm(GPU, c, DataType.FLOAT32, ReduceOp.SUM, AUTO), c.apiName());
    }
  }

  @Test void oneAlgorithmCallsAndOneRank() {
    for (Algorithm a : Algorithm.values()) {
      assertEquals(FLAT, norm(GPU_NO_VENDOR, Collective.BARRIER, DataType.FLOAT32, null, a));
      assertEquals(FLAT, norm(GPU_NO_VENDOR, Collective.ALL_TO_ALL_V, DataType.FLOAT32, null, a));
      assertEquals(FLAT, new CallPlanner(1, CommOptions.defaults(), GPU_NO_VENDOR).normalize(Collective.ALL_REDUCE,
          DataType.FLOAT32, ReduceOp.SUM, a), "one rank: " + a);
    }
  }

  @Test void countsAreTheAbiCountArguments() {
    CallPlanner p = new CallPlanner(4, CommOptions.defaults(), BackendOffer.HOST);
    HostTensor x8 = HostTensor.of(new float[8]), x32 = HostTensor.of(new float[32]);
    assertEquals(8, p.plan(Collective.ALL_REDUCE, x8, x8, ReduceOp.SUM, 0).count());
    assertEquals(8, p.plan(Collective.BROADCAST, x8, x32, null, 3).count());
    assertEquals(8, p.plan(Collective.ALL_GATHER, x8, x32, null, 0).count());
    assertEquals(8, p.plan(Collective.REDUCE_SCATTER, x32, x8, ReduceOp.SUM, 0).count());
    assertEquals(8, p.plan(Collective.ALL_TO_ALL, x32, x32, null, 0).count(), "count per peer");
    PlannedCall b = p.plan(Collective.BARRIER, null, null, null, 0);
    assertEquals(0, b.count());
    assertNull(b.problem());
    assertEquals(128, p.plan(Collective.ALL_GATHER, x8, x32, null, 0).messageBytes());
  }

  @Test void invalidArgumentsBecomeTheCallsProblemNotAnException() {
    CallPlanner p = new CallPlanner(4, CommOptions.defaults(), BackendOffer.HOST);
    HostTensor x8 = HostTensor.of(new float[8]), x31 = HostTensor.of(new float[31]);
    assertTrue(p.plan(Collective.ALL_GATHER, x8, x31, null, 0).problem().contains("needs size*input = 32"));
    assertTrue(p.plan(Collective.REDUCE_SCATTER, x31, x8, ReduceOp.SUM, 0).problem().contains("needs size*output = 32"));
    assertTrue(p.plan(Collective.BROADCAST, x8, x8, null, 4).problem().contains("root 4 outside 0..3"));
    assertTrue(p.plan(Collective.ALL_REDUCE, x8, HostTensor.of(new double[8]), ReduceOp.SUM, 0).problem().contains("differs"));
    assertTrue(p.plan(Collective.ALL_REDUCE, HostTensor.of(new int[8]), HostTensor.of(new int[8]), ReduceOp.premulSum(2), 0)
        .problem().contains("not defined"));
  }

  @Test void tensorsMustLiveWhereTheBackendWorks() {
    HostTensor h = HostTensor.of(new float[8]);
    DeviceTensor d0 = DeviceTensor.wrap(0x1000, DataType.FLOAT32, 8, 0), d1 = DeviceTensor.wrap(0x2000, DataType.FLOAT32, 8, 1);
    CallPlanner host = new CallPlanner(2, CommOptions.defaults(), BackendOffer.HOST);
    assertTrue(host.plan(Collective.ALL_REDUCE, d0, d0, ReduceOp.SUM, 0).problem().contains("needs HostTensor"));
    CallPlanner gpu = new CallPlanner(2, CommOptions.defaults(), GPU);
    assertNull(gpu.plan(Collective.ALL_REDUCE, d0, d0, ReduceOp.SUM, 0).problem());
    assertNull(gpu.plan(Collective.ALL_REDUCE, h, h, ReduceOp.SUM, 0).problem(), "host tensors are staged");
    assertTrue(gpu.plan(Collective.ALL_REDUCE, h, d0, ReduceOp.SUM, 0).problem().contains("both DeviceTensors or both HostTensors"));
    assertTrue(gpu.plan(Collective.ALL_REDUCE, d1, d1, ReduceOp.SUM, 0).problem().contains("device 0"));
    HostTensor counts = HostTensor.of(new long[2]);
    DeviceTensor dcounts = DeviceTensor.wrap(0x3000, DataType.INT64, 2, 0);
    assertTrue(gpu.planAllToAllV(d0, d0, new Splits(counts, null, counts, null), false).problem().contains("same memory"));
    assertNull(gpu.planAllToAllV(d0, d0, new Splits(dcounts, null, dcounts, null), false).problem());
    assertTrue(gpu.planAllToAllV(d0, d0, new Splits(dcounts, null, dcounts, null), true).problem().contains("sendOffsets is null"));
  }

  @Test void aForcedVendorWithoutTheLibraryIsTheCallsProblem() {
    CommOptions v = CommOptions.builder().algorithm(VENDOR).build();
    DeviceTensor d0 = DeviceTensor.wrap(0x1000, DataType.FLOAT32, 8, 0);
    PlannedCall c = new CallPlanner(2, v, GPU_NO_VENDOR).plan(Collective.ALL_REDUCE, d0, d0, ReduceOp.SUM, 0);
    assertTrue(c.problem().contains("VENDOR"), c.problem());
    PlannedCall ok = new CallPlanner(2, v, GPU).plan(Collective.ALL_REDUCE, d0, d0, ReduceOp.SUM, 0);
    assertNull(ok.problem());
    assertEquals(VENDOR, ok.request());
  }
}
