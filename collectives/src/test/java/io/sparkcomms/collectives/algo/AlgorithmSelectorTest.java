package io.sparkcomms.collectives.algo;

import static io.sparkcomms.collectives.Protocol.FLAT;
import static io.sparkcomms.collectives.Protocol.LP;
import static io.sparkcomms.collectives.Protocol.TREE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.CallPlanner;
import io.sparkcomms.collectives.plan.PlannedCall;
import org.junit.jupiter.api.Test;

/** The host backend's policy, end to end: the shared planning step, then {@link AlgorithmSelector}. */
class AlgorithmSelectorTest {
  static final CommOptions DEF = CommOptions.defaults();
  static final CommOptions LPON = CommOptions.builder().lowPrecision(true).build();

  /** The protocol the host backend runs for {@code c} over {@code ranks} ranks with a message of {@code bytes}. */
  static Protocol host(Collective c, long bytes, int ranks, DataType dt, ReduceOp op, CommOptions o) {
    Algorithm request = new CallPlanner(ranks, o, BackendOffer.HOST).normalize(c, dt, op, o.algorithm());
    return AlgorithmSelector.choose(c, bytes, ranks, dt, op, request, o);
  }

  static Protocol ar(long bytes, CommOptions o) { return host(Collective.ALL_REDUCE, bytes, 8, DataType.FLOAT32, ReduceOp.SUM, o); }

  @Test void allReduceThresholds() {
    CommOptions o = CommOptions.builder().flatMaxBytes(64 << 10).treeMaxBytes(32 << 20).build();
    assertEquals(FLAT, ar(8 << 10, o));
    assertEquals(FLAT, ar(64 << 10, o));
    assertEquals(TREE, ar((64 << 10) + 1, o));
    assertEquals(TREE, ar(1L << 30, o), "no vendor library on the host: TREE above the flat range, whatever treeMaxBytes says");
  }

  @Test void hostDefaults() {
    assertEquals(FLAT, ar(Thresholds.FLAT_MAX_BYTES, DEF), "host: flat to 256 KB");
    assertEquals(TREE, ar(Thresholds.FLAT_MAX_BYTES + 1, DEF));
    assertEquals(TREE, ar(1L << 30, DEF), "host: tree above, no vendor");
    assertEquals(256L << 10, Thresholds.FLAT_MAX_BYTES);
  }

  @Test void lowPrecisionGates() {
    assertEquals(TREE, ar(16 << 20, DEF), "LP is opt-in");
    assertEquals(LP, ar(16 << 20, LPON));
    assertEquals(TREE, ar((16 << 20) - 1, LPON), "below the host's lpMinBytes");
    assertEquals(LP, ar(1 << 20, LPON.toBuilder().lpMinBytes(1 << 20).build()), "an explicit lpMinBytes wins");
    assertEquals(TREE, host(Collective.ALL_REDUCE, 64 << 20, 8, DataType.FLOAT16, ReduceOp.SUM, LPON), "fp16 not eligible");
    assertEquals(LP, host(Collective.ALL_REDUCE, 64 << 20, 8, DataType.BFLOAT16, ReduceOp.AVG, LPON));
    assertEquals(TREE, host(Collective.ALL_REDUCE, 64 << 20, 8, DataType.FLOAT32, ReduceOp.MAX, LPON), "MAX not eligible");
    assertEquals(LP, host(Collective.ALL_GATHER, 64 << 20, 8, DataType.FLOAT32, null, LPON));
    assertEquals(FLAT, host(Collective.BROADCAST, 64 << 20, 8, DataType.FLOAT32, null, LPON));
    CommOptions perColl = CommOptions.builder().lowPrecision(true).lowPrecision(Collective.ALL_GATHER, false).build();
    assertEquals(FLAT, host(Collective.ALL_GATHER, 64 << 20, 8, DataType.FLOAT32, null, perColl));
    assertEquals(LP, host(Collective.ALL_TO_ALL, 64 << 20, 8, DataType.FLOAT32, null, perColl));
    CommOptions onlyAr = CommOptions.builder().lowPrecision(Collective.ALL_REDUCE, true).build();
    assertEquals(LP, ar(64 << 20, onlyAr));
    assertEquals(FLAT, host(Collective.REDUCE_SCATTER, 64 << 20, 8, DataType.FLOAT32, ReduceOp.SUM, onlyAr));
  }

  @Test void forcedAlgorithms() {
    CommOptions lp = CommOptions.builder().algorithm(Algorithm.LP).build();
    assertEquals(LP, ar(4, lp), "forced LP ignores the size threshold");
    assertEquals(FLAT, host(Collective.ALL_REDUCE, 4, 8, DataType.INT32, ReduceOp.SUM, lp), "ineligible dtype falls through");
    assertEquals(TREE, ar(4, CommOptions.builder().algorithm(Algorithm.TREE).build()));
    assertEquals(FLAT, ar(1L << 30, CommOptions.builder().algorithm(Algorithm.FLAT).build()));
    CommOptions tree = CommOptions.builder().algorithm(Algorithm.TREE).lowPrecision(true).build();
    assertEquals(FLAT, host(Collective.ALL_GATHER, 64 << 20, 8, DataType.FLOAT32, null, tree),
        "a forced TREE on allGather is its direct algorithm, not LP");
  }

  @Test void vendorOnTheHostIsAnArgumentErrorOfTheCall() {
    CommOptions v = CommOptions.builder().algorithm(Algorithm.VENDOR).build();
    PlannedCall c = new CallPlanner(2, v, BackendOffer.HOST).plan(Collective.ALL_REDUCE, HostTensor.of(new float[4]),
        HostTensor.of(new float[4]), ReduceOp.SUM, 0);
    assertNotNull(c.problem());
    assertEquals("algorithm VENDOR needs the GPU backend with NCCL/RCCL loaded; this communicator has none", c.problem());
  }

  @Test void oneRankAndBarrier() {
    assertEquals(FLAT, host(Collective.ALL_REDUCE, 1L << 30, 1, DataType.FLOAT32, ReduceOp.SUM, LPON));
    assertEquals(FLAT, host(Collective.BARRIER, 0, 8, DataType.FLOAT32, null, DEF));
    assertEquals(FLAT, host(Collective.ALL_TO_ALL_V, 1L << 30, 8, DataType.FLOAT32, null, LPON));
  }
}
