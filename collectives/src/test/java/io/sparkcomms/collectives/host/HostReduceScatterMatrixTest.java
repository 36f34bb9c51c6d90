package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * reduceScatter x op x dtype x algorithm FLAT, LP (where eligible) against a float64 reference,
 * output counts 1, 7, 1023 and 256K+3 per rank ({@link HostMatrix#COUNTS_REDUCE_SCATTER}; 16 ranks:
 * {@link HostSixteenRanksMatrixTest}).
 */
class HostReduceScatterMatrixTest {
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void flatAndLowPrecision(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS_REDUCE_SCATTER, EnumSet.of(Collective.REDUCE_SCATTER), Algorithm.FLAT, Algorithm.LP);
  }
}
