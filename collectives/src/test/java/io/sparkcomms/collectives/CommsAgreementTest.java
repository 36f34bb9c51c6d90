package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

/** Comms.create checks that every rank has the same communicator settings before building anything. */
class CommsAgreementTest {
  private static final CommOptions BASE =
      CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(1 << 16).timeout(Duration.ofSeconds(20)).build();

  /** Runs Comms.create on n threads with per-rank options; returns each rank's communicator or exception. */
  private static List<Object> create(int n, IntFunction<CommOptions> opts) throws Exception {
    InJvmRendezvous.Group g = InJvmRendezvous.group(n);
    return RankGroup.runCatching(n, 60, rank -> Comms.create(g.member(rank), opts.apply(rank)));
  }

  @Test void differentSettingsFailOnEveryRankNamingTheDifference() throws Exception {
    List<Object> res = create(3, r -> r == 2 ? BASE.toBuilder().lpBlockSize(64).lpOneShotMaxRanks(3).build() : BASE);
    for (Object o : res) {
      CommMismatchException e = assertInstanceOf(CommMismatchException.class, o);
      assertTrue(e.getMessage().contains("rank 0 lpBlockSize=default, rank 2 lpBlockSize=64"), e.getMessage());
      assertTrue(e.getMessage().contains("rank 0 lpOneShotMaxRanks=default, rank 2 lpOneShotMaxRanks=3"), e.getMessage());
    }
  }

  @Test void sameSettingsBuildAWorkingCommunicator() throws Exception {
    // the timeout may differ per rank
    List<Object> res = create(2, r -> r == 1 ? BASE.toBuilder().timeout(Duration.ofSeconds(30)).build() : BASE);
    List<Communicator> comms = new ArrayList<>();
    for (Object o : res) comms.add(assertInstanceOf(Communicator.class, o));
    try {
      List<Object> sums = RankGroup.runCatching(2, 60, rank -> {
        float[] x = {rank + 1f, 10f * (rank + 1)};
        comms.get(rank).allReduce(HostTensor.of(x), ReduceOp.SUM);
        return x;
      });
      for (Object x : sums) assertArrayEquals(new float[] {3f, 30f}, assertInstanceOf(float[].class, x));
    } finally {
      for (Communicator c : comms) c.close();
    }
  }
}
