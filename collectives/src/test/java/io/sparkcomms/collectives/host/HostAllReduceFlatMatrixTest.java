package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * allReduce on FLAT (out-of-place for every op, in-place SUM) x dtype against a float64 reference,
 * counts 1, 7, 1023 and 1M+3 ({@link HostMatrix}; 16 ranks: {@link HostSixteenRanksMatrixTest}).
 */
class HostAllReduceFlatMatrixTest {
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void flat(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS, EnumSet.of(Collective.ALL_REDUCE), Algorithm.FLAT);
  }
}
