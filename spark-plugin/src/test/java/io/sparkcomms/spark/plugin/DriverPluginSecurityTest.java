package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Abort;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Status;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The driver plugin against other senders, through {@code receive} as Spark calls it: executors "1"
 * and "2" run partitions 0 and 1 of barrier stage 5 (tasks 50 and 51); executor "3" is a stranger
 * holding the application's key, and "another application" is a sender with a key of its own.
 */
class DriverPluginSecurityTest {
  private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  private static Slot slot(int rank) { return new Slot(5, 0, 0, 0, rank, 2, 50 + rank); }

  private static TestExecutor stage(TestExecutor first) {
    first.driver.rendezvousRegistry().barrierStageSubmitted(5, 0);
    first.driver.rendezvousRegistry().taskStarted(5, 0, 0, "1", 50);
    first.driver.rendezvousRegistry().taskStarted(5, 0, 1, "2", 51);
    return first;
  }

  @Test void aForgedDepositForAnotherRankIsRefusedAndTheRealRankWorks() {
    TestExecutor one = stage(TestExecutor.of("1"));
    TestExecutor two = one.peer("2");
    TestExecutor stranger = one.peer("3");
    Reply forged = (Reply) stranger.ask(new Deposit(slot(1), b("evil"), 1000));
    assertEquals(Status.FAILED, forged.status());
    assertTrue(forged.message().contains("refused a deposit from task 51 on executor 3: partition 1 runs as task 51 on "
        + "executor 2"), forged.message());
    Reply asRankOne = (Reply) one.ask(new Deposit(slot(1), b("evil"), 1000));      // a member, for another rank
    assertEquals(Status.FAILED, asRankOne.status());
    PluginAuth.Sender otherApp = new PluginAuth.Sender(PluginAuth.newKey(), "2");
    assertThrows(IllegalArgumentException.class,
        () -> one.driver.receive(otherApp.seal(PluginWire.encodeRequest(new Deposit(slot(1), b("evil"), 1000))).wire()));

    assertEquals(Status.PENDING, ((Reply) one.ask(new Deposit(slot(0), b("r0"), 1000))).status());
    Reply done = (Reply) two.ask(new Deposit(slot(1), b("r1"), 1000));
    assertEquals(Status.DONE, done.status(), done.toString());
    assertEquals("r1", new String(done.blobs()[1], StandardCharsets.UTF_8));
  }

  @Test void aStrayPollOrAbortByANonMemberDoesNotFailTheGroup() {
    TestExecutor one = stage(TestExecutor.of("1"));
    TestExecutor two = one.peer("2");
    TestExecutor stranger = one.peer("3");
    assertEquals(Status.PENDING, ((Reply) one.ask(new Deposit(slot(0), b("r0"), 1000))).status());
    Reply strayPoll = (Reply) stranger.ask(new Poll(slot(1)));
    assertEquals(Status.FAILED, strayPoll.status());
    assertNull(stranger.ask(new Abort(slot(0), "stop")));                          // ignored, logged
    assertNull(two.ask(new Abort(slot(0), "stop")), "a member cannot abort as another rank either");

    Reply done = (Reply) two.ask(new Deposit(slot(1), b("r1"), 1000));
    assertEquals(Status.DONE, done.status(), done.toString());
    Reply peek = (Reply) stranger.ask(new Poll(slot(0)));
    assertEquals(Status.FAILED, peek.status());
    assertNull(peek.blobs(), "no blobs for a non-member");
    assertEquals(Status.DONE, ((Reply) one.ask(new Poll(slot(0)))).status());
  }

  /**
   * A claim or release is about its authenticated sender: nothing outside the application can make
   * the holder of a GPU exit or free its GPU, and another executor's release frees only its own.
   */
  @Test void spoofedGpuClaimsAndReleasesAreRefused() {
    TestExecutor one = TestExecutor.of("1");
    TestExecutor two = one.peer("2");
    GpuClaimProtocol.Claim gpu0 = new GpuClaimProtocol.Claim("h", "gpu", "0");
    assertTrue(((GpuClaimProtocol.Reply) one.ask(gpu0)).granted());

    PluginAuth.Sender madeUp = new PluginAuth.Sender(PluginAuth.newKey(), "made-up");
    assertThrows(IllegalArgumentException.class, () -> one.driver.receive(madeUp.seal(PluginWire.encodeRequest(gpu0)).wire()));
    PluginAuth.Sender asOne = new PluginAuth.Sender(PluginAuth.newKey(), "1");
    assertThrows(IllegalArgumentException.class,
        () -> one.driver.receive(asOne.seal(PluginWire.encodeRequest(new GpuClaimProtocol.Release())).wire()));
    assertThrows(IllegalArgumentException.class, () -> one.driver.receive(PluginWire.encodeRequest(new GpuClaimProtocol.Release())),
        "an unsealed release");
    assertTrue(((GpuClaimProtocol.Reply) one.ask(new GpuClaimProtocol.Check())).granted(), "the holder is not stopped");
    assertEquals("1", one.driver.gpuClaims().holder("h", "gpu", "0"));

    assertNull(two.ask(new GpuClaimProtocol.Release()));
    assertEquals("1", one.driver.gpuClaims().holder("h", "gpu", "0"), "executor 2's release leaves executor 1's claim");
    assertNull(one.ask(new GpuClaimProtocol.Release()));
    assertNull(one.driver.gpuClaims().holder("h", "gpu", "0"), "the holder's own release ends it");
  }

  @Test void theDriverRefusesToStartWithoutAuthenticationWhenRequired() {
    SparkCommsDriverPlugin d = new SparkCommsDriverPlugin();
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
        () -> d.start(Map.of("spark.sparkcomms.security.requireAuthenticate", "true", "spark.authenticate", "false")));
    assertTrue(e.getMessage().contains("spark.sparkcomms.security.requireAuthenticate=true but spark.authenticate=false"),
        e.getMessage());
    assertThrows(IllegalStateException.class, () -> d.receive(new byte[64]), "a driver that did not start accepts nothing");
    assertTrue(new SparkCommsDriverPlugin().start(Map.of("spark.sparkcomms.security.requireAuthenticate", "true",
        "spark.authenticate", "true")).containsKey(PluginAuth.KEY_SETTING));
  }
}
