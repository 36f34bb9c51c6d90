package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.api.Test;

/**
 * 16 ranks (more ranks than an MI300 node has GPUs), counts 1, 7, 1023 and 40,001: the whole matrix
 * of {@link HostMatrix}, one collective group per test.
 */
class HostSixteenRanksMatrixTest {
  @Test
  void allReduce() {
    HostMatrix.run(16, HostMatrix.COUNTS_16_RANKS, EnumSet.of(Collective.ALL_REDUCE), Algorithm.FLAT, Algorithm.TREE, Algorithm.LP);
  }

  @Test
  void reduceScatter() {
    HostMatrix.run(16, HostMatrix.COUNTS_16_RANKS, EnumSet.of(Collective.REDUCE_SCATTER), Algorithm.FLAT, Algorithm.LP);
  }

  @Test
  void allGatherAllToAllAndBroadcast() {
    HostMatrix.run(16, HostMatrix.COUNTS_16_RANKS, HostDataMovementMatrixTest.WHICH, Algorithm.FLAT, Algorithm.LP);
  }
}
