package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** AUTO picks FLAT, TREE and LP by size, and each answer is checked against a float64 reference. */
class HostAutoSelectionTest {
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 5})
  void autoSelectionUsesEveryAlgorithmAndStaysCorrect(int ranks) {
    CommOptions o = CommOptions.builder().flatMaxBytes(4 << 10).treeMaxBytes(64 << 10)
        .lowPrecision(true).lpMinBytes(1 << 20).stagingBytes(128 << 10).build();
    long seed = System.nanoTime();
    try (RankGroup g = new RankGroup(ranks, o)) {
      List<List<String>> perRank = g.run(r -> {
        CollectiveChecker ck = new CollectiveChecker(g.comm(r), seed);
        List<Protocol> used = new ArrayList<>();
        for (int count : new int[] {100, 10_000, 300_000}) {
          used.add(ck.allReduce(DataType.FLOAT32, ReduceOp.SUM, count, false, CollectiveChecker.Shape.NORMAL));
        }
        assertEquals(List.of(Protocol.FLAT, Protocol.TREE, Protocol.LP), used);
        return ck.failures();
      });
      perRank.forEach(f -> assertTrue(f.isEmpty(), "seed " + seed + ": " + f));
    }
  }
}
