package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * reduceScatterV x op x dtype against a float64 reference, per-rank blocks of 0 up to 0, 1, 7, 1023
 * and 256K+3 elements ({@link HostMatrix#COUNTS_REDUCE_SCATTER_V}: the input is the sum of all blocks),
 * with poisoned outputs and guard elements.
 */
class HostReduceScatterVMatrixTest {
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void everyOpAndDtype(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS_REDUCE_SCATTER_V, EnumSet.of(Collective.REDUCE_SCATTER_V), Algorithm.FLAT);
  }
}
