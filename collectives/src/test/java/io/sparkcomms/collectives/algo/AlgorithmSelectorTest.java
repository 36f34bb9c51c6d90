package io.sparkcomms.collectives.algo;

import static io.sparkcomms.collectives.Algorithm.FLAT;
import static io.sparkcomms.collectives.Algorithm.LP;
import static io.sparkcomms.collectives.Algorithm.TREE;
import static io.sparkcomms.collectives.Algorithm.VENDOR;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.ReduceOp;
import org.junit.jupiter.api.Test;

class AlgorithmSelectorTest {
  static final CommOptions DEF = CommOptions.defaults();
  static final CommOptions LPON = CommOptions.builder().lowPrecision(true).build();

  static Algorithm ar(long bytes, CommOptions o, boolean vendor) {
    return AlgorithmSelector.choose(Collective.ALL_REDUCE, bytes, 8, DataType.FLOAT32, ReduceOp.SUM, o, vendor);
  }

  static Algorithm gpu(long bytes, int ranks, CommOptions o) {
    return AlgorithmSelector.choose(Collective.ALL_REDUCE, bytes, ranks, DataType.FLOAT32, ReduceOp.SUM, o,
        new AlgorithmSelector.Backend(true, true, false));
  }

  @Test void allReduceThresholds() {
    CommOptions o = CommOptions.builder().flatMaxBytes(256 << 10).treeMaxBytes(32 << 20).build();
    assertEquals(FLAT, ar(8 << 10, o, true));
    assertEquals(FLAT, ar(256 << 10, o, true));
    assertEquals(TREE, ar((256 << 10) + 1, o, true));
    assertEquals(TREE, ar(32 << 20, o, true));
    assertEquals(VENDOR, ar((32 << 20) + 1, o, true));
    assertEquals(TREE, ar(1L << 30, o, false), "no vendor library: stay on TREE");
  }

  @Test void measuredDefaultsPerBackendAndRankCount() {
    assertEquals(FLAT, gpu(4 << 20, 2, DEF), "2 GPUs: flat up to 4 MB");
    assertEquals(TREE, gpu((4 << 20) + 1, 2, DEF));
    assertEquals(TREE, gpu(128 << 20, 2, DEF));
    assertEquals(VENDOR, gpu((128 << 20) + 1, 2, DEF), "NCCL above 128 MB");
    assertEquals(TREE, gpu(1 << 20, 8, DEF), "8 GPUs: flat only to 256 KB");
    assertEquals(FLAT, ar(256 << 10, DEF, false), "host: flat to 256 KB");
    assertEquals(TREE, ar(1L << 30, DEF, false), "host: tree above, no vendor");
    assertEquals(TREE, gpu(1 << 20, 2, CommOptions.builder().flatMaxBytes(64 << 10).build()), "an explicit option wins");
    assertEquals(TREE, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 2, DataType.FLOAT32, ReduceOp.SUM,
        CommOptions.builder().lowPrecision(true).build(), new AlgorithmSelector.Backend(true, true, false)),
        "a backend without LP falls through");
    AlgorithmSelector.Backend gpuLp = new AlgorithmSelector.Backend(true, true, true);
    CommOptions lpOn = CommOptions.builder().lowPrecision(true).build();
    assertEquals(LP, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 2, DataType.FLOAT32, ReduceOp.SUM, lpOn, gpuLp));
    assertEquals(LP, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 2, DataType.BFLOAT16, ReduceOp.SUM, lpOn, gpuLp),
        "GPU LP is faster than NCCL for bf16 too (one-shot kernels)");
    assertEquals(TREE, AlgorithmSelector.choose(Collective.ALL_REDUCE, 8 << 20, 2, DataType.BFLOAT16, ReduceOp.SUM, lpOn, gpuLp),
        "below lpMinBytes: full precision");
    assertEquals(LP, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 2, DataType.BFLOAT16, ReduceOp.SUM,
        CommOptions.builder().algorithm(LP).build(), gpuLp), "forced LP still runs");
  }

  @Test void lowPrecisionGates() {
    assertEquals(TREE, ar(16 << 20, DEF, false), "LP is opt-in");
    assertEquals(LP, ar(16 << 20, LPON, false));
    assertEquals(TREE, ar((16 << 20) - 1, LPON, false), "below lpMinBytes");
    assertEquals(TREE, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 8, DataType.FLOAT16, ReduceOp.SUM, LPON, false), "fp16 not eligible");
    assertEquals(LP, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 8, DataType.BFLOAT16, ReduceOp.AVG, LPON, false));
    assertEquals(TREE, AlgorithmSelector.choose(Collective.ALL_REDUCE, 64 << 20, 8, DataType.FLOAT32, ReduceOp.MAX, LPON, false), "MAX not eligible");
    assertEquals(LP, AlgorithmSelector.choose(Collective.ALL_GATHER, 64 << 20, 8, DataType.FLOAT32, null, LPON, false));
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.BROADCAST, 64 << 20, 8, DataType.FLOAT32, null, LPON, false));
    CommOptions perColl = CommOptions.builder().lowPrecision(true).lowPrecision(Collective.ALL_GATHER, false).build();
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.ALL_GATHER, 64 << 20, 8, DataType.FLOAT32, null, perColl, false));
    assertEquals(LP, AlgorithmSelector.choose(Collective.ALL_TO_ALL, 64 << 20, 8, DataType.FLOAT32, null, perColl, false));
    CommOptions onlyAr = CommOptions.builder().lowPrecision(Collective.ALL_REDUCE, true).build();
    assertEquals(LP, ar(64 << 20, onlyAr, false));
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.REDUCE_SCATTER, 64 << 20, 8, DataType.FLOAT32, ReduceOp.SUM, onlyAr, false));
  }

  @Test void forcedAlgorithms() {
    CommOptions lp = CommOptions.builder().algorithm(LP).build();
    assertEquals(LP, ar(4, lp, false), "forced LP ignores the size threshold");
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.ALL_REDUCE, 4, 8, DataType.INT32, ReduceOp.SUM, lp, false), "ineligible dtype falls through");
    assertEquals(TREE, ar(4, CommOptions.builder().algorithm(TREE).build(), false));
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.ALL_GATHER, 4, 8, DataType.FLOAT32, null, CommOptions.builder().algorithm(TREE).build(), false));
    CommOptions vendor = CommOptions.builder().algorithm(VENDOR).build();
    assertEquals(VENDOR, ar(4, vendor, true));
    assertThrows(IllegalArgumentException.class, () -> ar(4, vendor, false));
  }

  @Test void oneRankAndBarrier() {
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.ALL_REDUCE, 1L << 30, 1, DataType.FLOAT32, ReduceOp.SUM, LPON, true));
    assertEquals(FLAT, AlgorithmSelector.choose(Collective.BARRIER, 0, 8, DataType.FLOAT32, null, DEF, true));
  }
}
