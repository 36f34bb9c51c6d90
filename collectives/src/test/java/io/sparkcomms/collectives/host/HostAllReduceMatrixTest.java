package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * allReduce (out-of-place for every op, in-place SUM) x dtype x algorithm FLAT, TREE, LP (where
 * eligible) against a float64 reference, counts 1, 7, 1023 and 1M+3 ({@link HostMatrix}).
 */
class HostAllReduceMatrixTest {
  @ParameterizedTest(name = "{0} ranks, FLAT")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void flat(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS, EnumSet.of(Collective.ALL_REDUCE), Algorithm.FLAT);
  }

  @ParameterizedTest(name = "{0} ranks, TREE and LP")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void treeAndLowPrecision(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS, EnumSet.of(Collective.ALL_REDUCE), Algorithm.TREE, Algorithm.LP);
  }

  @Test
  void sixteenRanks() {
    HostMatrix.run(16, HostMatrix.COUNTS_16_RANKS, EnumSet.of(Collective.ALL_REDUCE), Algorithm.FLAT, Algorithm.TREE, Algorithm.LP);
  }
}
