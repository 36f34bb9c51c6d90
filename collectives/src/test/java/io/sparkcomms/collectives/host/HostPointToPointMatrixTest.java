package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import java.util.EnumSet;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * send, recv and batches x dtype, counts 1, 7, 1023 and 1M+3 ({@link HostMatrix#COUNTS}): batch rings
 * both ways, blocking and async pairs, a batch with every peer plus a second transfer matched in
 * order; received data against the sender's inputs, guards around every receive buffer, inputs kept.
 */
class HostPointToPointMatrixTest {
  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void pointToPoint(int ranks) {
    HostMatrix.run(ranks, HostMatrix.COUNTS, EnumSet.of(Collective.SEND), Algorithm.FLAT);
  }
}
