package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CallOptions;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Per-call options through {@link Communicator#withOptions}: a call's own timeout, shorter and longer
 * than the communicator's, for collectives, async calls and transfers (and the communicator's own
 * again for the next call); a forced algorithm, and ranks that force different ones. The exceptions
 * name the bound that applied; the late rank sleeps well past the shorter bound and far below the
 * longer one, so no outcome depends on the machine's load.
 */
class CallOptionsTest {
  private static CommOptions timeout(long ms) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofMillis(ms)).build();
  }

  private static void sleep(long ms) {
    try {
      Thread.sleep(ms);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Test void aShorterCallTimeoutBoundsThatCall() {
    try (RankGroup g = new RankGroup(2, timeout(120_000))) {
      CommTimeoutException e = assertThrows(CommTimeoutException.class, () ->
          g.comm(0).withOptions(CallOptions.timeout(Duration.ofMillis(300))).allReduce(HostTensor.of(new float[4]), ReduceOp.SUM));
      assertTrue(e.getMessage().contains("after 300 ms"), e.getMessage());
    }
  }

  @Test void aShorterCallTimeoutBoundsAnAsyncCallAndATransfer() {
    try (RankGroup g = new RankGroup(2, timeout(120_000))) {
      Communicator quick = g.comm(0).withOptions(CallOptions.timeout(Duration.ofMillis(300)));
      CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> quick.sendAsync(HostTensor.of(new float[4]), 1).waitFor());
      assertTrue(e.getMessage().contains("300 ms"), e.getMessage());
    }
    try (RankGroup g = new RankGroup(2, timeout(120_000))) {
      Communicator quick = g.comm(0).withOptions(CallOptions.timeout(Duration.ofMillis(300)));
      CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> quick.allReduceAsync(HostTensor.of(new float[4]),
          HostTensor.of(new float[4]), ReduceOp.SUM).waitFor());
      assertTrue(e.getMessage().contains("after 300 ms"), e.getMessage());
    }
  }

  @Test void aLongerCallTimeoutOutlastsALatePeerAndTheNextCallHasTheCommunicatorsAgain() {
    // 2 s: long enough to build the communicators on a loaded machine
    try (RankGroup g = new RankGroup(2, timeout(2000))) {
      List<Object> res = g.runCatching(r -> {
        if (r == 1) sleep(6000);  // late by three times the communicator's 2 s
        double[] x = {r + 1};
        g.comm(r).withOptions(CallOptions.timeout(Duration.ofSeconds(120))).allReduce(HostTensor.of(x), ReduceOp.SUM);
        return x[0];
      });
      assertEquals(List.of(3.0, 3.0), res);
      // the next call is bounded by the communicator's 2 s again
      CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> g.comm(0).allReduce(HostTensor.of(new float[4]), ReduceOp.SUM));
      assertTrue(e.getMessage().contains("after 2000 ms"), e.getMessage());
    }
  }

  @Test void aForcedAlgorithmRunsAndRanksThatForceDifferentOnesFailOnBoth() {
    try (RankGroup g = new RankGroup(2, timeout(60_000))) {
      for (Algorithm a : new Algorithm[] {Algorithm.TREE, Algorithm.FLAT, Algorithm.LP}) {
        long before = g.comm(0).stats().calls(Protocol.valueOf(a.name()));
        g.run(r -> {
          g.comm(r).withOptions(CallOptions.algorithm(a)).allReduce(HostTensor.of(new float[4096]), ReduceOp.SUM);
          return null;
        });
        assertEquals(before + 1, g.comm(0).stats().calls(Protocol.valueOf(a.name())), a.name());
      }
      List<Object> res = g.runCatching(r -> {
        g.comm(r).withOptions(CallOptions.algorithm(r == 0 ? Algorithm.TREE : Algorithm.FLAT)).allReduce(HostTensor.of(new float[64]), ReduceOp.SUM);
        return "ok";
      });
      for (Object o : res) assertInstanceOf(CommMismatchException.class, o);
      g.assertStillWorks();
    }
  }

  @Test void invalidOptionsAreRefused() {
    assertThrows(IllegalArgumentException.class, () -> CallOptions.timeout(Duration.ZERO));
    assertThrows(IllegalArgumentException.class, () -> CallOptions.timeout(Duration.ofMillis(-1)));
    assertThrows(NullPointerException.class, () -> CallOptions.algorithm(null));
  }
}
