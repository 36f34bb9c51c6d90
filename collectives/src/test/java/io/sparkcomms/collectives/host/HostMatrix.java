package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
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
import java.util.Set;

/**
 * The checked matrix of {@link CollectiveChecker#runMatrix} on the host backend, ranks as threads of
 * this JVM, one communicator per forced algorithm, with a small staging area so large counts run in
 * many chunks. The Host*MatrixTest classes each run a part of it (by collective, algorithm or rank
 * count), so that no test class runs for minutes without a report; together they run all of it.
 */
final class HostMatrix {
  /** 1M+3: the large count, which runs in many chunks of the 256K staging area. */
  static final int[] COUNTS = {1, 7, 1023, (1 << 20) + 3};
  /**
   * reduceScatter: the count is each rank's output, and its input is ranks x count (8M+24 elements
   * at 8 ranks for 1M+3). 256K+3 still spans 2 (2-byte types) to 8 (8-byte types) full chunks of
   * the 256K staging area plus a partial one, in each rank's slice, at every rank count.
   */
  static final int[] COUNTS_REDUCE_SCATTER = {1, 7, 1023, (1 << 18) + 3};
  /** The rooted and per-rank-count calls: {@link #COUNTS} and an empty call. */
  static final int[] COUNTS_ROOTED = {0, 1, 7, 1023, (1 << 20) + 3};
  /** reduceScatterV: {@link #COUNTS_REDUCE_SCATTER} and an empty call. */
  static final int[] COUNTS_REDUCE_SCATTER_V = {0, 1, 7, 1023, (1 << 18) + 3};
  /** 16 ranks (more ranks than an MI300 node has GPUs), smaller counts. */
  static final int[] COUNTS_16_RANKS = {1, 7, 1023, 40_001};

  private HostMatrix() {}

  static CommOptions options(Algorithm a) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).algorithm(a)
        .stagingBytes(256 << 10).timeout(Duration.ofSeconds(60)).build();
  }

  /**
   * Runs the collectives {@code which} on {@code ranks} ranks for every algorithm of {@code algorithms}
   * and asserts that every output matched its float64 reference and (above one rank) that every
   * algorithm ran.
   */
  static void run(int ranks, int[] counts, Set<Collective> which, Algorithm... algorithms) {
    long seed = System.nanoTime();
    Map<Algorithm, RankGroup> groups = new EnumMap<>(Algorithm.class);
    try {
      for (Algorithm a : algorithms) groups.put(a, new RankGroup(ranks, options(a)));
      CollectiveChecker.References shared = new CollectiveChecker.References(ranks);
      List<List<String>> perRank = groups.get(algorithms[0]).run(r ->
          CollectiveChecker.runMatrix(a -> groups.get(a).comm(r), seed, counts, algorithms, which, shared));
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
}
