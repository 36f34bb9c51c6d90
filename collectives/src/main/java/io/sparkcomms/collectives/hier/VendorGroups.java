package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.gpu.VendorGroup;
import io.sparkcomms.collectives.net.Mesh;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The vendor groups of a GPU communicator across nodes, built once every node has its GPU
 * communicator: one world round carries every rank's readiness (the vendor library loads) and the
 * unique ids (rank 0's for the world group, each rail's first member's for its rail); then every rank
 * joins the world group and its rail (equal nodes: the ranks of its local rank on every node; uneven
 * nodes: the leaders only), and a last round reports every rank's outcome, so a failure anywhere
 * fails every rank.
 */
final class VendorGroups {
  private static final int MAX_ERROR = 4096;

  private VendorGroups() {}

  static Communicator assemble(Rendezvous rv, CommOptions o, NodeLayout layout, Mesh mesh, GpuCommunicator local, int device) {
    int r = rv.rank(), n = layout.worldSize();
    int lr = layout.localRank(r);
    int[] rail = layout.uniform() ? layout.rail(lr) : lr == 0 ? layout.leaders() : null;
    String err = null;
    byte[] worldId = new byte[0], railId = new byte[0];
    int idLen = 0;
    try {
      if (!VendorGroup.available()) throw new CommException("the vendor collective library (NCCL / RCCL) does not load");
      idLen = VendorGroup.idLength();
      if (r == 0) worldId = VendorGroup.uniqueId();
      if (rail != null && rail[0] == r) railId = VendorGroup.uniqueId();
    } catch (RuntimeException e) {
      err = "rank " + r + " cannot use the vendor library across nodes: " + e.getMessage();
    }
    byte[][] all = rv.allGather(encode(err, worldId, railId), o.timeout());
    byte[][][] ids = new byte[n][][];
    String first = null;
    for (int p = 0; p < n; p++) {
      ids[p] = decode(all[p], p, r);
      if (ids[p][0].length > 0 && first == null) first = new String(ids[p][0], StandardCharsets.UTF_8);
    }
    if (first != null) throw new CommException("rank " + r + ": " + first);
    checkId(ids[0][1], idLen, 0, r);
    if (rail != null) checkId(ids[rail[0]][2], idLen, rail[0], r);
    VendorGroup world = null, railGroup = null;
    err = null;
    try {
      world = VendorGroup.create(r, n, device, ids[0][1], o.timeout());
      if (rail != null) railGroup = VendorGroup.create(indexOf(rail, r), rail.length, device, ids[rail[0]][2], o.timeout());
    } catch (RuntimeException e) {
      err = "could not join its vendor groups: " + e.getMessage();
    }
    String failed = HierarchicalComms.outcome(rv, r, err, o);
    if (failed != null) {
      if (railGroup != null) railGroup.abort();
      if (world != null) world.abort();
      if (railGroup != null) railGroup.close();
      if (world != null) world.close();
      throw new CommException("rank " + r + ": " + failed);
    }
    return new GpuHierarchicalCommunicator(r, o, layout, mesh, local, railGroup, world);
  }

  /** [error length, error][world id length, id][rail id length, id], big-endian lengths. */
  private static byte[] encode(String err, byte[] worldId, byte[] railId) {
    byte[] e = err == null ? new byte[0] : err.getBytes(StandardCharsets.UTF_8);
    if (e.length > MAX_ERROR) e = java.util.Arrays.copyOf(e, MAX_ERROR);
    ByteBuffer b = ByteBuffer.allocate(12 + e.length + worldId.length + railId.length);
    b.putInt(e.length).put(e).putInt(worldId.length).put(worldId).putInt(railId.length).put(railId);
    return b.array();
  }

  private static byte[][] decode(byte[] raw, int from, int me) {
    try {
      ByteBuffer b = ByteBuffer.wrap(raw);
      byte[][] out = new byte[3][];
      for (int i = 0; i < 3; i++) {
        int len = b.getInt();
        if (len < 0 || len > Math.min(MAX_ERROR, b.remaining())) throw new IllegalArgumentException("length " + len);
        out[i] = new byte[len];
        b.get(out[i]);
      }
      if (b.hasRemaining()) throw new IllegalArgumentException(b.remaining() + " trailing bytes");
      return out;
    } catch (IllegalArgumentException | BufferUnderflowException e) {
      throw new CommException("rank " + me + ": rank " + from + " sent an unreadable vendor-group message (" + e.getMessage() + ")");
    }
  }

  private static void checkId(byte[] id, int len, int from, int me) {
    if (id.length != len) throw new CommException("rank " + me + ": rank " + from + " sent a unique id of " + id.length + " bytes, expected " + len);
  }

  private static int indexOf(int[] a, int v) {
    for (int i = 0; i < a.length; i++) if (a[i] == v) return i;
    throw new IllegalStateException(v + " not in its rail");
  }
}
