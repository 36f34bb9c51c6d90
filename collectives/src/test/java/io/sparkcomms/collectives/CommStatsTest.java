package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** CommStats per collective and per protocol, as two ranks' calls recorded them. */
class CommStatsTest {
  @Test void callsAreCountedPerCollectiveAndProtocol() {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build();
    try (RankGroup g = new RankGroup(2, o)) {
      List<CommStats> stats = g.run(r -> {
        Communicator c = g.comm(r);
        c.allReduce(HostTensor.of(new float[10]), ReduceOp.SUM);
        c.allReduce(HostTensor.of(new float[10]), ReduceOp.SUM);
        c.reduce(HostTensor.of(new double[5]), HostTensor.of(new double[5]), ReduceOp.MAX, 1);
        c.gather(HostTensor.of(new int[3]), r == 0 ? HostTensor.of(new int[6]) : null, 0);
        c.allGatherV(HostTensor.of(new long[r + 1]), HostTensor.of(new long[3]), new long[] {1, 2});
        return c.stats();
      });
      for (CommStats s : stats) {
        assertEquals(Map.of(Collective.ALL_REDUCE, 2L, Collective.REDUCE, 1L, Collective.GATHER, 1L, Collective.ALL_GATHER_V, 1L),
            s.callsByCollective());
        assertEquals(80, s.bytes(Collective.ALL_REDUCE));
        assertEquals(40, s.bytes(Collective.REDUCE));
        assertEquals(24, s.bytes(Collective.GATHER), "gather: size x count x 4 bytes on every rank alike");
        assertEquals(24, s.bytes(Collective.ALL_GATHER_V));
        assertEquals(5, s.calls(Protocol.FLAT));
        assertEquals(5, s.totalCalls());
      }
    }
  }
}
