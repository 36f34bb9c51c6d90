package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CallOptions;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.function.IntFunction;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Transfers that do not match: a clear exception on every rank involved, within the timeout, no pair
 * directory left behind, and the communicator's collectives still work afterwards (ranks as threads,
 * segments and pair directories in a directory of this test's own).
 */
class PointToPointBadInputTest {
  /** The communicator's timeout: long, so that building channels never times out on a loaded machine. */
  private static final Duration TIMEOUT = Duration.ofSeconds(60);
  /** The transfers that must time out take this one of their own ({@link CallOptions}). */
  private static final Duration SHORT = Duration.ofSeconds(2);
  @TempDir Path dir;
  private Communicator[] comms;

  @BeforeEach void create() throws Exception {
    int n = 3;
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(TIMEOUT).build();
    InJvmRendezvous.Group g = InJvmRendezvous.group(n);
    List<Object> made = RankGroup.runCatching(n, 60, r -> HostCommunicator.create(g.member(r), o, dir));
    comms = made.stream().map(Communicator.class::cast).toArray(Communicator[]::new);
  }

  @AfterEach void close() throws Exception {
    for (Communicator c : comms) c.close();
    try (Stream<Path> s = Files.list(dir)) {
      List<Path> left = s.filter(p -> p.getFileName().toString().startsWith("sparkcomms-p2p-")).toList();
      assertEquals(List.of(), left, "pair directories left behind");
    }
  }

  private List<Object> on(IntFunction<Object> f) throws Exception { return RankGroup.runCatching(comms.length, 60, f); }

  private void stillWorks() throws Exception {
    for (Object o : on(r -> {
      double[] x = {r + 1};
      comms[r].allReduce(HostTensor.of(x), ReduceOp.SUM);
      return x[0];
    })) {
      assertEquals(6.0, o);
    }
  }

  private static float[] floats(int n) {
    float[] f = new float[n];
    for (int i = 0; i < n; i++) f[i] = i + 0.5f;
    return f;
  }

  @Test void aReceiveOfAnotherCountFailsOnBothRanks() throws Exception {
    List<Object> res = on(r -> {
      if (r == 0) comms[0].send(HostTensor.of(floats(7)), 1);
      else if (r == 1) comms[1].recv(HostTensor.of(new float[8]), 0);
      return "ok";
    });
    for (int r = 0; r < 2; r++) {
      CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(r), "rank " + r);
      assertTrue(e.getMessage().contains(r == 0 ? "send to rank 1" : "recv from rank 0") && e.getMessage().contains("count"), e.getMessage());
    }
    assertEquals("ok", res.get(2));
    // the channel stays usable: a matching transfer after the mismatch goes through
    float[] got = new float[7];
    on(r -> {
      if (r == 0) comms[0].send(HostTensor.of(floats(7)), 1);
      else if (r == 1) comms[1].recv(HostTensor.of(got), 0);
      return null;
    });
    assertEquals(6.5f, got[6]);
    stillWorks();
  }

  @Test void anotherDtypeOrTwoSendersFailOnBothRanks() throws Exception {
    List<Object> res = on(r -> {
      if (r == 0) comms[0].send(HostTensor.of(floats(4)), 2);
      else if (r == 2) comms[2].recv(HostTensor.of(new int[4]), 0);
      return "ok";
    });
    assertInstanceOf(CommMismatchException.class, res.get(0));
    assertInstanceOf(CommMismatchException.class, res.get(2));
    res = on(r -> {
      if (r != 2) comms[r].send(HostTensor.of(floats(4)), 1 - r);
      return "ok";
    });
    assertInstanceOf(CommMismatchException.class, res.get(0));
    assertInstanceOf(CommMismatchException.class, res.get(1));
    stillWorks();
  }

  @Test void aSendWithoutItsReceiveTimesOutAndThePairStaysRefused() throws Exception {
    CommTimeoutException e = assertThrows(CommTimeoutException.class,
        () -> comms[1].withOptions(CallOptions.timeout(SHORT)).send(HostTensor.of(floats(3)), 2));
    assertTrue(e.getMessage().contains("rank 2") && e.getMessage().contains("matching"), e.getMessage());
    // the higher rank of the pair, arriving after its peer gave up, times out too; then both refuse at once
    assertThrows(CommTimeoutException.class, () -> comms[2].withOptions(CallOptions.timeout(SHORT)).recv(HostTensor.of(new float[3]), 1));
    CommException again = assertThrows(CommException.class, () -> comms[1].send(HostTensor.of(floats(3)), 2));
    assertTrue(again.getMessage().contains("could not be built earlier"), again.getMessage());
    stillWorks();
  }

  @Test void aPeerOutsideTheGroupOrThisRankIsRefusedAtOnce() {
    assertThrows(IllegalArgumentException.class, () -> comms[0].send(HostTensor.of(floats(1)), 3));
    assertThrows(IllegalArgumentException.class, () -> comms[0].recv(HostTensor.of(floats(1)), -1));
    assertThrows(IllegalArgumentException.class, () -> comms[1].send(HostTensor.of(floats(1)), 1));
    assertThrows(IllegalArgumentException.class, () -> comms[0].batch().send(HostTensor.of(floats(1)), 1).recv(HostTensor.of(floats(1)), 0).issue());
  }

  @Test void aRankThatAbortsDuringABatchFailsItsPeersBatchAndLaterTransfersAreRefused() throws Exception {
    // build the channels first, then rank 1 aborts once ranks 0 and 2 are in batches that need it
    on(r -> {
      HostTensor a = HostTensor.of(floats(5)), b = HostTensor.of(new float[5]);
      comms[r].batch().send(a, (r + 1) % 3).recv(b, (r + 2) % 3).issue().waitFor();
      return null;
    });
    java.util.concurrent.CountDownLatch inBatch = new java.util.concurrent.CountDownLatch(2);
    for (int r : new int[] {0, 2}) {
      comms[r].addHook(new io.sparkcomms.collectives.observe.CallHook() {
        @Override public void preCall(io.sparkcomms.collectives.observe.CallInfo c) { inBatch.countDown(); }
      });
    }
    List<Object> res = on(r -> {
      if (r == 1) {
        try {
          inBatch.await();  // both batches have started; neither can finish without rank 1
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
        comms[1].abort("rank 1 gives up");
        return "aborted";
      }
      comms[r].batch().recv(HostTensor.of(new float[5]), 1).send(HostTensor.of(floats(5)), 1).issue().waitFor();
      return "ok";
    });
    for (int r : new int[] {0, 2}) {
      CommAbortedException e = assertInstanceOf(CommAbortedException.class, res.get(r), "rank " + r);
      assertTrue(e.getMessage().contains("rank 1 gives up"), e.getMessage());
    }
    // the aborted rank refuses transfers at once, with a built channel (to 0) or without one
    assertThrows(CommAbortedException.class, () -> comms[1].send(HostTensor.of(floats(5)), 0));
    assertThrows(CommAbortedException.class, () -> comms[1].batch().send(HostTensor.of(floats(5)), 2).issue().waitFor());
  }

  @Test void aPeerThatAbortedIsRefusedBeforeAChannelIsBuilt() {
    comms[0].abort("rank 0 stops");
    CommAbortedException e = assertThrows(CommAbortedException.class, () -> comms[0].send(HostTensor.of(floats(2)), 2));
    assertTrue(e.getMessage().contains("rank 0 stops"), e.getMessage());
  }

  @Test void aBatchIsIssuedOnce() {
    var b = comms[0].batch();
    b.issue().waitFor();
    assertThrows(IllegalStateException.class, b::issue);
    assertThrows(IllegalStateException.class, () -> b.send(HostTensor.allocate(DataType.FLOAT32, 1), 1));
  }
}
