package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Abort;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The payload codec of the plugin's messages (SparkSubmitPluginTest shows why they travel as bytes). */
class PluginWireTest {
  private static final Slot SLOT = new Slot(3, 1, 0, 2, 1, 4, 77);

  private static Object request(Object m) { return PluginWire.decodeRequest(PluginWire.encodeRequest(m)); }

  private static Object reply(Object m) { return PluginWire.decodeReply(PluginWire.encodeReply(m)); }

  /** Bytes allocated by this thread while {@code r} runs (HotSpot's per-thread counter). */
  private static long allocatedBy(Runnable r) {
    com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    long before = mx.getCurrentThreadAllocatedBytes();
    r.run();
    return mx.getCurrentThreadAllocatedBytes() - before;
  }

  @Test void everyMessageRoundTrips() {
    Deposit d = (Deposit) request(new Deposit(SLOT, new byte[] {1, 2, 3}, 500));
    assertEquals(SLOT, d.slot());
    assertArrayEquals(new byte[] {1, 2, 3}, d.blob());
    assertEquals(500, d.timeoutMs());
    assertEquals(new Poll(SLOT), request(new Poll(SLOT)));
    assertEquals(new Abort(SLOT, "timed out"), request(new Abort(SLOT, "timed out")));
    assertEquals(new GpuClaimProtocol.Claim("h", "gpu", "1"), request(new GpuClaimProtocol.Claim("h", "gpu", "1")));
    assertEquals(new GpuClaimProtocol.Check(), request(new GpuClaimProtocol.Check()));
    assertEquals(new GpuClaimProtocol.Release(), request(new GpuClaimProtocol.Release()));

    Reply r = (Reply) reply(Reply.done(new byte[][] {{1}, {2, 3}}));
    assertEquals(RendezvousProtocol.Status.DONE, r.status());
    assertArrayEquals(new byte[] {2, 3}, r.blobs()[1]);
    Reply pending = (Reply) reply(Reply.pending(new int[] {0, 2}));
    assertArrayEquals(new int[] {0, 2}, pending.missing());
    assertNull(pending.blobs());
    assertEquals("why", ((Reply) reply(Reply.failed("why"))).message());
    assertEquals(RendezvousProtocol.Status.UNVERIFIED, ((Reply) reply(Reply.unverified("wait"))).status());
    assertEquals(GpuClaimProtocol.Reply.denied("taken"), reply(GpuClaimProtocol.Reply.denied("taken")));
    assertEquals(GpuClaimProtocol.Reply.ok(), reply(GpuClaimProtocol.Reply.ok()));
  }

  /**
   * A 320-byte message (frame included) whose deposit claims a blob of 2 GiB - 1 bytes is refused
   * from its length field: nothing near that size is allocated, and it takes no time.
   */
  @Test void a320ByteMessageClaimingA2GiBBlobIsRefusedWithoutAllocation() {
    TestExecutor e = TestExecutor.of("1");
    e.driver.rendezvousRegistry().barrierStageSubmitted(3, 1);
    e.driver.rendezvousRegistry().taskStarted(3, 1, 1, "1", 77);
    byte[] payload = new byte[320 - PluginAuth.frameBytes("1")];
    ByteBuffer b = ByteBuffer.wrap(payload);
    b.put((byte) 1).putInt(3).putInt(1).putInt(0).putInt(2).putInt(1).putInt(4).putLong(77);   // DEPOSIT, the slot
    b.putInt(Integer.MAX_VALUE);                                                                // the blob's length
    byte[] wire = e.sender.seal(payload).wire();
    assertEquals(320, wire.length);

    IllegalArgumentException[] refused = new IllegalArgumentException[1];
    long allocated = allocatedBy(() -> refused[0] = assertThrows(IllegalArgumentException.class, () -> e.driver.receive(wire)));
    assertEquals("sparkcomms plugin: refused a blob of 2147483647 bytes; the limit is " + RendezvousProtocol.MAX_BLOB_BYTES,
        refused[0].getMessage());
    assertTrue(allocated < (1 << 20), "allocated " + allocated + " bytes for a 320-byte message");
    assertEquals(0, e.driver.rendezvousRegistry().heldBytes());
  }

  /** Every count and length is checked against its limit before anything is allocated. */
  @Test void oversizedCountsAndLengthsAreRefused() {
    ByteBuffer claim = ByteBuffer.allocate(64).put((byte) 4).putInt(Integer.MAX_VALUE);            // CLAIM, host length
    IllegalArgumentException host = assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(claim.array()));
    assertTrue(host.getMessage().contains("refused a host of 2147483647 bytes; the limit is " + PluginWire.MAX_NAME_BYTES),
        host.getMessage());

    ByteBuffer shortHost = ByteBuffer.allocate(16).put((byte) 4).putInt(100);                     // 100 bytes said, 11 there
    IllegalArgumentException truncated = assertThrows(IllegalArgumentException.class,
        () -> PluginWire.decodeRequest(shortHost.array()));
    assertTrue(truncated.getMessage().contains("truncated message: its host needs 100 bytes, 11 remain"), truncated.getMessage());

    ByteBuffer blobs = ByteBuffer.allocate(64).put((byte) 17).put((byte) 1).putInt(0).putInt(0).put((byte) 1).putInt(1_000_000);
    IllegalArgumentException count = assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeReply(blobs.array()));
    assertTrue(count.getMessage().contains("a count of 1000000 blobs (at most " + RendezvousProtocol.MAX_RANKS + ")"),
        count.getMessage());

    for (int[] sizeRank : new int[][] {{RendezvousProtocol.MAX_RANKS + 1, 0}, {0, 0}, {4, 4}, {4, -1}}) {
      byte[] poll = ByteBuffer.allocate(33).put((byte) 2).putInt(3).putInt(1).putInt(0).putInt(2)
          .putInt(sizeRank[1]).putInt(sizeRank[0]).putLong(7).array();
      IllegalArgumentException slot = assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(poll));
      assertTrue(slot.getMessage().contains("ranks (1 to 64)") || slot.getMessage().contains("rank " + sizeRank[1] + " of a group"),
          slot.getMessage());
    }
    byte[] negativeTimeout = PluginWire.encodeRequest(new Deposit(SLOT, new byte[0], 0));
    ByteBuffer.wrap(negativeTimeout).putLong(negativeTimeout.length - 8, -1);
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(negativeTimeout)).getMessage()
        .contains("negative timeout"));
    assertThrows(IllegalArgumentException.class, () -> PluginWire.encodeRequest(
        new Deposit(SLOT, new byte[RendezvousProtocol.MAX_BLOB_BYTES + 1], 0)), "the encoder keeps the limit too");
  }

  @Test void trailingBytesUnknownKindsAndBadTextAreRefused() {
    byte[] check = PluginWire.encodeRequest(new GpuClaimProtocol.Check());
    byte[] longer = java.util.Arrays.copyOf(check, check.length + 1);
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(longer)).getMessage()
        .contains("1 bytes after its last field"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(new byte[] {99})).getMessage()
        .contains("unknown kind 99"));
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(new byte[0])).getMessage()
        .contains("truncated"));
    assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(PluginWire.encodeReply(GpuClaimProtocol.Reply.ok())),
        "a reply is not a request");
    byte[] claim = ByteBuffer.allocate(1 + 3 * 4 + 2).put((byte) 4).putInt(2).put((byte) 0xc3).put((byte) 0x28)
        .putInt(0).putInt(0).array();
    assertTrue(assertThrows(IllegalArgumentException.class, () -> PluginWire.decodeRequest(claim)).getMessage()
        .contains("host that is not UTF-8"));
  }

  /** Free text is cut to its limit by the encoder (whole characters), identifiers are refused instead. */
  @Test void longTextIsCutAndLongNamesAreRefused() {
    String reason = "é".repeat(10_000);
    Abort a = (Abort) request(new Abort(SLOT, reason));
    int bytes = a.reason().getBytes(StandardCharsets.UTF_8).length;
    assertTrue(bytes <= PluginWire.MAX_TEXT_BYTES && bytes > PluginWire.MAX_TEXT_BYTES - 8, bytes + " bytes");
    assertTrue(a.reason().startsWith("éé") && a.reason().endsWith("..."), a.reason().substring(a.reason().length() - 8));
    assertThrows(IllegalArgumentException.class, () -> PluginWire.encodeRequest(
        new GpuClaimProtocol.Claim("h".repeat(PluginWire.MAX_NAME_BYTES + 1), "gpu", "0")));
  }
}
