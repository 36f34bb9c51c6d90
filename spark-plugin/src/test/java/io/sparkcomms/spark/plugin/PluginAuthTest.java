package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import java.io.ByteArrayOutputStream;
import java.io.ObjectOutputStream;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.Test;

/** The authentication of the plugin's messages: the key handed to executors, MAC, replay window, types, sizes. */
class PluginAuthTest {
  private static final byte[] PAYLOAD = PluginWire.encodeRequest(new GpuClaimProtocol.Check());

  private static String refusal(Runnable r) { return assertThrows(IllegalArgumentException.class, r::run).getMessage(); }

  @Test void theDriverHandsEachApplicationItsOwnRandomKey() {
    Map<String, String> a = new SparkCommsDriverPlugin().start(Map.of());
    Map<String, String> b = new SparkCommsDriverPlugin().start(Map.of());
    byte[] ka = PluginAuth.decodeKey(a.get(PluginAuth.KEY_SETTING));
    assertEquals(PluginAuth.KEY_BYTES, ka.length);
    assertFalse(Arrays.equals(ka, PluginAuth.decodeKey(b.get(PluginAuth.KEY_SETTING))));
    assertTrue(PluginAuth.KEY_SETTING.toLowerCase().contains("secret"), "Spark's default redaction regex hides it");
    assertTrue(refusal(() -> PluginAuth.decodeKey("AAAA")).contains("has 3 bytes, expected 32"));
  }

  /** A message sealed with another key, or changed in one bit, is refused before its payload is read. */
  @Test void aMessageWithABadMacOrTheWrongKeyIsRefused() {
    TestExecutor e = TestExecutor.of("1");
    PluginAuth.Sender otherApp = new PluginAuth.Sender(PluginAuth.newKey(), "1");
    String wrongKey = refusal(() -> e.driver.receive(otherApp.seal(PAYLOAD).wire()));
    assertTrue(wrongKey.contains("authentication code does not match: it was not sealed with this application's key"), wrongKey);

    byte[] flipped = e.sender.seal(PluginWire.encodeRequest(new GpuClaimProtocol.Claim("h", "gpu", "0"))).wire();
    flipped[flipped.length - 40] ^= 1;                                // a payload byte
    assertTrue(refusal(() -> e.driver.receive(flipped)).contains("authentication code does not match"));
    assertEquals(null, e.driver.gpuClaims().holder("h", "gpu", "0"), "nothing was claimed");
    assertTrue(((GpuClaimProtocol.Reply) e.ask(new GpuClaimProtocol.Check())).granted(), "the channel still works");
  }

  @Test void aReplayedMessageIsRefused() {
    TestExecutor e = TestExecutor.of("1");
    PluginAuth.Sealed m = e.seal(new GpuClaimProtocol.Claim("h", "gpu", "0"));
    e.driver.receive(m.wire());
    String replay = refusal(() -> e.driver.receive(m.wire()));
    assertEquals("sparkcomms plugin: refused message 1 of executor 1: replayed (the driver has accepted this message already)",
        replay);

    // Out of order within the window is fine (concurrent threads of one executor); too old is refused.
    List<PluginAuth.Sealed> sealed = new ArrayList<>();
    for (int i = 0; i < PluginAuth.REPLAY_WINDOW + 10; i++) sealed.add(e.seal(new GpuClaimProtocol.Check()));
    e.driver.receive(sealed.get(sealed.size() - 1).wire());
    e.driver.receive(sealed.get(sealed.size() - 2).wire());
    e.driver.receive(sealed.get(20).wire());
    String old = refusal(() -> e.driver.receive(sealed.get(3).wire()));
    assertTrue(old.contains("older than the replay window"), old);
    assertTrue(refusal(() -> e.driver.receive(sealed.get(20).wire())).contains("replayed"));

    // Each executor has its own numbers.
    TestExecutor other = e.peer("2");
    assertTrue(((GpuClaimProtocol.Reply) other.ask(new GpuClaimProtocol.Check())).granted());
  }

  /** receive accepts nothing but byte[]: objects (Spark has deserialized them already) are refused by type alone. */
  @Test void aNonByteArrayMessageIsRefused() {
    TestExecutor e = TestExecutor.of("1");
    Poll poll = new Poll(new Slot(1, 0, 0, 0, 0, 2, 0));
    String object = refusal(() -> e.driver.receive(poll));
    assertEquals("sparkcomms plugin: refused a " + Poll.class.getName() + ": the driver plugin accepts only its own "
        + "authenticated byte[] messages (is the same sparkcomms version on the driver and the executors?)", object);
    assertTrue(refusal(() -> e.driver.receive("hello")).contains("refused a java.lang.String"));
    assertTrue(refusal(() -> e.driver.receive(null)).contains("refused a null"));
  }

  /** Java-serialized bytes (what a client of an unauthenticated plugin would send) are refused unread. */
  @Test void serializedObjectsAreNotDeserialized() throws Exception {
    TestExecutor e = TestExecutor.of("1");
    ByteArrayOutputStream bytes = new ByteArrayOutputStream();
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(new ArrayList<>(List.of("x".repeat(100))));
    }
    String r = refusal(() -> e.driver.receive(bytes.toByteArray()));
    assertTrue(r.contains("refused a message of version -84"), r);                  // 0xACED, the stream magic
  }

  @Test void framesOutsideTheLimitsAreRefused() throws Exception {
    TestExecutor e = TestExecutor.of("1");
    byte[] huge = new byte[PluginAuth.MAX_REQUEST_BYTES + 1];
    assertEquals("sparkcomms plugin: refused a message of " + huge.length + " bytes; the limit is " + PluginAuth.MAX_REQUEST_BYTES,
        refusal(() -> e.driver.receive(huge)));
    assertTrue(refusal(() -> e.driver.receive(new byte[10])).contains("shorter than its frame"));

    // An authentic frame whose payload length says 2 GiB.
    byte[] key = PluginAuth.decodeKey(e.settings.get(PluginAuth.KEY_SETTING));
    ByteBuffer b = ByteBuffer.allocate(17 + 4 + 32).put(PluginAuth.VERSION).put(PluginAuth.TO_DRIVER).putShort((short) 1)
        .put((byte) '1').putLong(1).putInt(Integer.MAX_VALUE).put(new byte[] {5, 0, 0, 0});
    Mac mac = Mac.getInstance("HmacSHA256");
    mac.init(new SecretKeySpec(key, "HmacSHA256"));
    mac.update(b.array(), 0, b.position());
    b.put(mac.doFinal());
    String length = refusal(() -> e.driver.receive(b.array()));
    assertTrue(length.contains("a payload length of 2147483647 in a frame with 4 payload bytes"), length);
  }

  /** An executor accepts only the driver's reply to its own request. */
  @Test void aReplyIsBoundToItsRequest() {
    TestExecutor e = TestExecutor.of("1");
    PluginAuth.Sealed first = e.seal(new GpuClaimProtocol.Check());
    PluginAuth.Sealed second = e.seal(new GpuClaimProtocol.Check());
    Object reply = e.driver.receive(first.wire());
    assertArrayEquals(PluginWire.encodeReply(GpuClaimProtocol.Reply.ok()), e.sender.openReply(reply, first.counter()));
    assertTrue(refusal(() -> e.sender.openReply(reply, second.counter())).contains("waiting for the answer to message 2"));
    TestExecutor other = e.peer("2");
    assertTrue(refusal(() -> other.sender.openReply(reply, first.counter())).contains("a reply for executor 1"));
    assertTrue(refusal(() -> e.sender.openReply(first.wire(), first.counter())).contains("direction 'Q', expected 'R'"),
        "a request is not a reply");
    assertNotEquals(null, reply);
  }
}
