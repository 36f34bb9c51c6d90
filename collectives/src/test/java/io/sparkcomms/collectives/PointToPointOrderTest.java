package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;

import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The batch schedules of {@link PointToPoint} on host channels: concurrent (a thread per peer) and
 * one peer after the other in the shared order of the pairs (what the GPU backend runs). Every rank
 * exchanges with every peer in one batch, each rank adding its transfers in another order; all data
 * checked exactly, at 3, 5 and 8 ranks.
 */
class PointToPointOrderTest {
  @TempDir Path dir;

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {3, 5, 8})
  void everyPeerInOneBatchInEitherSchedule(int n) throws Exception {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build();
    // the GPU's schedule first, on fresh channels (it builds them itself), then the host's
    for (boolean concurrent : new boolean[] {false, true}) {
      PairDirectory pairs = PairDirectory.fresh(dir);
      List<PointToPoint> p2p = new ArrayList<>();
      List<AbstractCommunicator> made = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        p2p.add(new PointToPoint(r, n, o.timeout(), pairs, rv -> {
          HostCommunicator c = HostCommunicator.create(rv, o);
          synchronized (made) {
            made.add(c);
          }
          return c;
        }));
      }
      try {
        List<Object> res = RankGroup.runCatching(n, 120, r -> {
          List<BatchSendRecv.Transfer> ops = new ArrayList<>();
          double[][] got = new double[n][];
          // rank r adds its peers starting at r+1, recvs before sends on odd ranks
          for (int k = 1; k < n; k++) {
            int q = (r + k) % n;
            got[q] = new double[4];
            BatchSendRecv.Transfer send = new BatchSendRecv.Transfer(true, HostTensor.of(new double[] {r, q, r * 100 + q, -1}), q);
            BatchSendRecv.Transfer recv = new BatchSendRecv.Transfer(false, HostTensor.of(got[q]), q);
            ops.add(r % 2 == 0 ? send : recv);
            ops.add(r % 2 == 0 ? recv : send);
          }
          p2p.get(r).runBatch(ops, concurrent, o.timeout());
          for (int q = 0; q < n; q++) if (q != r) assertArrayEquals(new double[] {q, r, q * 100 + r, -1}, got[q], "rank " + r + " from " + q);
          return "ok";
        });
        for (Object x : res) if (x instanceof RuntimeException e) throw e;
      } finally {
        p2p.forEach(PointToPoint::close);
        made.forEach(AbstractCommunicator::close);
      }
    }
  }
}
