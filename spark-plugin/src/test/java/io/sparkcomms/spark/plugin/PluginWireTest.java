package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The encoding of the plugin's RPC messages (SparkSubmitPluginTest shows why they travel as bytes). */
class PluginWireTest {
  @Test void protocolMessagesRoundTrip() {
    Slot slot = new Slot(3, 1, 0, 2, 1, 4);
    Deposit d = (Deposit) PluginWire.decode(PluginWire.encode(new Deposit(slot, new byte[] {1, 2, 3}, 500)));
    assertEquals(slot, d.slot());
    assertArrayEquals(new byte[] {1, 2, 3}, d.blob());
    Reply r = (Reply) PluginWire.decode(PluginWire.encode(Reply.done(new byte[][] {{1}, {2, 3}})));
    assertEquals(RendezvousProtocol.Status.DONE, r.status());
    assertArrayEquals(new byte[] {2, 3}, r.blobs()[1]);
    assertArrayEquals(new int[] {0, 2}, ((Reply) PluginWire.decode(PluginWire.encode(Reply.pending(new int[] {0, 2})))).missing());
    assertEquals(new GpuClaimProtocol.Claim("h", "gpu", "1", "7"),
        PluginWire.decode(PluginWire.encode(new GpuClaimProtocol.Claim("h", "gpu", "1", "7"))));
    assertEquals(GpuClaimProtocol.Reply.denied("taken"), PluginWire.decode(PluginWire.encode(GpuClaimProtocol.Reply.denied("taken"))));
    assertNull(PluginWire.decode(null));
  }

  @Test void theDriverPluginAnswersEncodedMessagesEncoded() {
    SparkCommsDriverPlugin driver = new SparkCommsDriverPlugin();
    Object reply = driver.receive(PluginWire.encode(new GpuClaimProtocol.Claim("h", "gpu", "0", "1")));
    assertTrue(reply instanceof byte[], "an encoded reply: " + reply);
    assertEquals(GpuClaimProtocol.Reply.ok(), PluginWire.decode(reply));
    assertNull(driver.receive(PluginWire.encode(new GpuClaimProtocol.Release("1"))), "no reply to a release");
  }

  @Test void otherClassesAreRejected() {
    List<String> foreign = new ArrayList<>(List.of("x"));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PluginWire.decode(PluginWire.encode(foreign)));
    assertTrue(e.getMessage().contains("rejected message"), e.getMessage());
    IllegalArgumentException notBytes = assertThrows(IllegalArgumentException.class, () -> PluginWire.decode("hello"));
    assertTrue(notBytes.getMessage().contains("expected an encoded message"), notBytes.getMessage());
  }
}
