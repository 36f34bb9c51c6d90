package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * reduce (every op, in and out of place), gather, scatter and allGatherV x dtype against a float64
 * reference, counts 0, 1, 7, 1023 and 1M+3 ({@link HostMatrix#COUNTS_ROOTED}), with poisoned outputs and guard
 * elements; non-roots pass no output (or one that must stay untouched) and keep their inputs.
 */
class HostRootedMatrixTest {
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void rootedAndAllGatherV(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS_ROOTED,
        EnumSet.of(Collective.REDUCE, Collective.GATHER, Collective.SCATTER, Collective.ALL_GATHER_V), Algorithm.FLAT);
  }
}
