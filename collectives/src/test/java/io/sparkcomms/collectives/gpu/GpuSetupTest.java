package io.sparkcomms.collectives.gpu;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The GPU setup message every rank sends in round 1 (pure Java), and the launch table. */
class GpuSetupTest {
  static final int BLOB = 40, ID = 16;

  static GpuSetup.Hello hello(String err, int blob, boolean vendor, int id) {
    return new GpuSetup.Hello(err, new byte[blob], ProcessId.current().encode(), vendor, new byte[id], new byte[0]);
  }

  static byte[] pairs() { return PairDirectory.fresh().encode().getBytes(StandardCharsets.UTF_8); }

  @Test void onlyRankZeroNamesThePairDirectoryAndItsTextIsChecked() {
    byte[] blob = new byte[BLOB];
    byte[] p = pairs();
    GpuSetup.Hello h = new GpuSetup.Hello(null, blob, ProcessId.current().encode(), false, new byte[0], p);
    assertArrayEquals(p, GpuSetup.Hello.decode(h.encode(), 0, BLOB, ID).pairs());
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(h.encode(), 1, BLOB, ID), "from rank 1");
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(hello(null, BLOB, false, 0).encode(), 0, BLOB, ID), "none from rank 0");
    byte[] bad = "p2p 0123 /tmp".getBytes(StandardCharsets.UTF_8);
    GpuSetup.Hello b = new GpuSetup.Hello(null, blob, ProcessId.current().encode(), false, new byte[0], bad);
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(b.encode(), 0, BLOB, ID), "malformed");
    byte[] longer = new byte[PairDirectory.MAX_TEXT + 1];
    GpuSetup.Hello l = new GpuSetup.Hello(null, blob, ProcessId.current().encode(), false, new byte[0], longer);
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(l.encode(), 0, BLOB, ID), "too long");
  }

  @Test void roundTrip() {
    byte[] blob = new byte[BLOB];
    Arrays.fill(blob, (byte) 7);
    byte[] id = new byte[ID];
    id[3] = 9;
    GpuSetup.Hello h = new GpuSetup.Hello(null, blob, ProcessId.current().encode(), true, id, pairs());
    GpuSetup.Hello back = GpuSetup.Hello.decode(h.encode(), 0, BLOB, ID);
    assertNull(back.error());
    assertArrayEquals(blob, back.blob());
    assertArrayEquals(id, back.id());
    assertTrue(back.vendorReady());
    assertEquals(ProcessId.current(), ProcessId.decode(back.process()));
    GpuSetup.Hello failed = GpuSetup.Hello.decode(hello("sc_comm_create failed: no device", 0, false, 0).encode(), 2, BLOB, ID);
    assertEquals("sc_comm_create failed: no device", failed.error());
    assertFalse(failed.vendorReady());
  }

  @Test void everyLengthIsCheckedBeforeUse() {
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(hello(null, BLOB - 1, false, 0).encode(), 1, BLOB, ID), "short blob");
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(hello(null, BLOB, true, ID).encode(), 1, BLOB, ID), "id from rank 1");
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(hello(null, BLOB, true, ID - 1).encode(), 0, BLOB, ID), "short id");
    byte[] ok = hello(null, BLOB, false, 0).encode();
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(Arrays.copyOf(ok, ok.length - 1), 1, BLOB, ID), "truncated");
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(Arrays.copyOf(ok, ok.length + 1), 1, BLOB, ID), "trailing");
    byte[] neg = ok.clone();
    ByteBuffer.wrap(neg).putInt(4, -5);  // the error length
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(neg, 1, BLOB, ID), "negative length");
    byte[] huge = ok.clone();
    ByteBuffer.wrap(huge).putInt(8, Integer.MAX_VALUE);  // the blob length (the error is empty)
    CommException e = assertThrows(CommException.class, () -> GpuSetup.Hello.decode(huge, 3, BLOB, ID));
    assertTrue(e.getMessage().startsWith("rank 3 sent an unreadable GPU setup message"), e.getMessage());
    byte[] magic = ok.clone();
    magic[0] ^= 1;
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(magic, 1, BLOB, ID), "another protocol");
    assertThrows(CommException.class, () -> GpuSetup.Hello.decode(new byte[0], 1, BLOB, ID), "empty");
  }

  @Test void launchTableCoversWhatEachCollectiveHas() {
    for (Protocol p : Protocol.values()) assertTrue(GpuLaunch.launchable(Collective.ALL_REDUCE, p), p.name());
    assertTrue(GpuLaunch.launchable(Collective.ALL_GATHER, Protocol.VENDOR));
    assertTrue(GpuLaunch.launchable(Collective.REDUCE_SCATTER, Protocol.LP));
    assertFalse(GpuLaunch.launchable(Collective.ALL_TO_ALL, Protocol.VENDOR), "no vendor all-to-all entry point");
    assertFalse(GpuLaunch.launchable(Collective.BROADCAST, Protocol.LP));
    assertFalse(GpuLaunch.launchable(Collective.ALL_GATHER, Protocol.LAMPORT));
    assertFalse(GpuLaunch.launchable(Collective.BARRIER, Protocol.VENDOR));
    assertFalse(GpuLaunch.launchable(Collective.ALL_TO_ALL_V, Protocol.LP));
    for (Collective c : Collective.values()) {
      if (GpuComposed.composes(c) || c.isPointToPoint()) {
        for (Protocol p : Protocol.values()) assertFalse(GpuLaunch.launchable(c, p), c.apiName() + " is composed, never launched");
        continue;
      }
      assertTrue(GpuLaunch.launchable(c, Protocol.FLAT), c.apiName());
      // the vendor library has exactly the collectives that have a vendor entry point
      assertEquals(c.hasVendorVariant(), GpuLaunch.launchable(c, Protocol.VENDOR), c.apiName());
      assertEquals(c.hasLowPrecision(), GpuLaunch.launchable(c, Protocol.LP), c.apiName());
    }
  }

  @Test void protocolCodesAreTheAbis() {
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_PROTO_LAMPORT, Protocol.LAMPORT.code());
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_PROTO_LL, Protocol.LL.code());
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_PROTO_FLAT, Protocol.FLAT.code());
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_PROTO_TREE, Protocol.TREE.code());
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_PROTO_LP, Protocol.LP.code());
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_PROTO_VENDOR, Protocol.VENDOR.code());
    assertNull(Protocol.ofCode(0));
    assertNull(Protocol.ofCode(7));
    for (Collective c : Collective.values()) assertTrue(GpuLaunch.collectiveCode(c) >= 0);
    assertEquals(io.sparkcomms.nativeapi.SparkCommsNative.SC_COLL_ALLTOALLV, GpuLaunch.collectiveCode(Collective.ALL_TO_ALL_V));
  }
}
