package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * allGather and allToAll x dtype x algorithm FLAT, LP (where eligible), and broadcast (out-of-place
 * and in-place, two roots) on FLAT, against the inputs (exact, or one FP8 rounding), counts 1, 7,
 * 1023 and 1M+3 ({@link HostMatrix}; 16 ranks: {@link HostSixteenRanksMatrixTest}).
 */
class HostDataMovementMatrixTest {
  static final EnumSet<Collective> WHICH = EnumSet.of(Collective.ALL_GATHER, Collective.ALL_TO_ALL, Collective.BROADCAST);

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void flatAndLowPrecision(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS, WHICH, Algorithm.FLAT, Algorithm.LP);
  }
}
