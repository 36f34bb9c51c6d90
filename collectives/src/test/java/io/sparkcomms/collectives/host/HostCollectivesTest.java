package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.RankGroup;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every collective x op x dtype x algorithm against a float64 reference, ranks as threads of this JVM,
 * counts 1, 7, 1023 and 1M+3, with a small staging area so large counts run in many chunks.
 */
class HostCollectivesTest {
  static final int[] COUNTS = {1, 7, 1023, (1 << 20) + 3};

  static CommOptions options(Algorithm a) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).algorithm(a)
        .stagingBytes(256 << 10).timeout(Duration.ofSeconds(60)).build();
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void fullMatrixAgainstFloat64Reference(int ranks) {
    long seed = System.nanoTime();
    Map<Algorithm, RankGroup> groups = new EnumMap<>(Algorithm.class);
    try {
      for (Algorithm a : new Algorithm[] {Algorithm.FLAT, Algorithm.TREE, Algorithm.LP}) groups.put(a, new RankGroup(ranks, options(a)));
      List<List<String>> perRank = groups.get(Algorithm.FLAT).run(r ->
          CollectiveChecker.runMatrix(a -> groups.get(a).comm(r), seed, COUNTS));
      List<String> all = new ArrayList<>();
      perRank.forEach(all::addAll);
      assertTrue(all.isEmpty(), "seed " + seed + ": " + String.join("\n", all));
      for (Algorithm a : groups.keySet()) {
        Communicator c = groups.get(a).comm(0);
        if (ranks > 1) assertTrue(c.stats().calls(Protocol.valueOf(a.name())) > 0, a + " was never used: " + c.stats());
      }
    } finally {
      groups.values().forEach(RankGroup::close);
    }
  }

  /** 16 ranks (more ranks than an MI300 node has GPUs), smaller counts: the whole matrix again. */
  @org.junit.jupiter.api.Test
  void sixteenRanks() {
    long seed = System.nanoTime();
    Map<Algorithm, RankGroup> groups = new EnumMap<>(Algorithm.class);
    try {
      for (Algorithm a : new Algorithm[] {Algorithm.FLAT, Algorithm.TREE, Algorithm.LP}) groups.put(a, new RankGroup(16, options(a)));
      List<List<String>> perRank = groups.get(Algorithm.FLAT).run(r ->
          CollectiveChecker.runMatrix(a -> groups.get(a).comm(r), seed, new int[] {1, 7, 1023, 40_001}));
      List<String> all = new ArrayList<>();
      perRank.forEach(all::addAll);
      assertTrue(all.isEmpty(), "seed " + seed + ": " + String.join("\n", all));
    } finally {
      groups.values().forEach(RankGroup::close);
    }
  }

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
          used.add(ck.allReduce(io.sparkcomms.collectives.DataType.FLOAT32, io.sparkcomms.collectives.ReduceOp.SUM, count, false, CollectiveChecker.Shape.NORMAL));
        }
        assertEquals(List.of(Protocol.FLAT, Protocol.TREE, Protocol.LP), used);
        return ck.failures();
      });
      perRank.forEach(f -> assertTrue(f.isEmpty(), "seed " + seed + ": " + f));
    }
  }
}
