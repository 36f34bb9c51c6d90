package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.net.Mesh;
import io.sparkcomms.collectives.net.MeshRendezvous;
import io.sparkcomms.collectives.net.Transport;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Builds the communicator of ranks that may run on several nodes (through
 * {@code Comms.createAcrossNodes}, which first compares the ranks' settings).
 *
 * <p>Rendezvous rounds on the world rendezvous: every rank's node name and transport address (and
 * rank 0's world id); when all name one node the rest is the host backend's own creation on the
 * same rendezvous. Otherwise: every rank attaches its mesh to the transport, a round makes sure all
 * have (so no message reaches a process before it listens for it), each node builds its
 * shared-memory communicator over the mesh, and a last round reports every node's outcome. When a
 * node could not (its ranks do not share /dev/shm), every rank becomes a node of its own, logged,
 * and one more round reports those outcomes.
 */
public final class HierarchicalComms {
  /** Longest node name accepted from a peer. */
  public static final int MAX_NODE_NAME = 255;
  /** Longest transport address accepted from a peer. */
  public static final int MAX_ADDRESS = 512;

  private HierarchicalComms() {}

  /** How a node's communicator is built (tests replace it to make a node fail). */
  interface LocalFactory {
    Communicator create(Rendezvous rv, CommOptions o);
  }

  /** The world communicator from its parts, once every node built its own ({@code rv}: the world's). */
  interface Assembler {
    Communicator assemble(Rendezvous rv, NodeLayout layout, Mesh mesh, Communicator local);
  }

  /**
   * The host composition for {@code rv.rank()}, which runs on {@code node}; {@code transport} carries
   * the cross-node leg.
   */
  public static Communicator create(Rendezvous rv, String node, Transport transport, CommOptions o) {
    return create(rv, node, transport, o, HostCommunicator::create);
  }

  static Communicator create(Rendezvous rv, String node, Transport transport, CommOptions o, LocalFactory factory) {
    return create(rv, node, transport, o, () -> HostCommunicator.create(rv, o), factory,
        (w, layout, mesh, local) -> new HierarchicalCommunicator(w.rank(), o, layout, mesh, local));
  }

  /**
   * The GPU composition ({@link GpuHierarchicalCommunicator}) for {@code rv.rank()} on {@code device}:
   * each node's ranks share a GPU communicator, the vendor library carries the cross-node leg, and
   * {@code transport} the agreements and abort notices. Ranks that all name one node get the plain
   * GPU backend.
   */
  public static Communicator createGpu(Rendezvous rv, String node, Transport transport, CommOptions o, int device) {
    // the node's communicator needs no vendor communicator of its own: the groups carry that leg
    return create(rv, node, transport, o, () -> GpuCommunicator.create(rv, o, device),
        (lrv, lo) -> GpuCommunicator.create(lrv, lo.toBuilder().vendor(false).build(), device),
        (w, layout, mesh, local) -> VendorGroups.assemble(w, o, layout, mesh, (GpuCommunicator) local, device));
  }

  private static Communicator create(Rendezvous rv, String node, Transport transport, CommOptions o,
                                     java.util.function.Supplier<Communicator> oneNode, LocalFactory factory, Assembler assembler) {
    checkName("node name", node, MAX_NODE_NAME);
    String address = transport.address();
    checkName("transport address", address, MAX_ADDRESS);
    byte[] id = new byte[8];
    new SecureRandom().nextBytes(id);
    String mine = node + "\n" + address + "\n" + HexFormat.of().formatHex(id);
    byte[][] all = rv.allGather(mine.getBytes(StandardCharsets.UTF_8), o.timeout());
    int n = rv.size();
    String[] nodes = new String[n], addresses = new String[n];
    long worldId = 0;
    for (int p = 0; p < n; p++) {
      String[] parts = new String(all[p], StandardCharsets.UTF_8).split("\n", -1);
      try {
        if (parts.length != 3) throw new IllegalArgumentException("fields");
        nodes[p] = checkName("node name", parts[0], MAX_NODE_NAME);
        addresses[p] = checkName("transport address", parts[1], MAX_ADDRESS);
        if (p == 0) worldId = parts[2].length() == 16 ? HexFormat.fromHexDigitsToLong(parts[2]) : badId();
      } catch (RuntimeException e) {
        throw new CommException("rank " + rv.rank() + ": rank " + p + " sent an unreadable node greeting (" + e.getMessage() + ")");
      }
    }
    NodeLayout layout = new NodeLayout(nodes);
    if (layout.nodeCount() == 1) return oneNode.get();
    int r = rv.rank();
    Mesh mesh = new Mesh(transport, worldId, r, addresses);
    Communicator local = null;
    try {
      rv.allGather(new byte[0], o.timeout());  // every rank's mesh listens before any message is sent
      int[] members = layout.members(layout.nodeOf(r));
      String err = null;
      try {
        local = factory.create(new MeshRendezvous(mesh, members), nodeOptions(o));
      } catch (RuntimeException e) {
        err = "the ranks of node " + layout.nodeName(layout.nodeOf(r)) + " (world ranks " + java.util.Arrays.toString(members)
            + ") could not build their shared-memory communicator: " + e.getMessage();
      }
      String failed = outcome(rv, r, err, o);
      if (failed != null) {
        // Ranks that name one node but cannot share memory (pods with a /dev/shm each, a wrong node
        // name): every rank becomes a node of its own, so the communicator still works, over the mesh only.
        if (local != null) local.close();
        local = null;
        System.getLogger(HierarchicalComms.class.getName()).log(System.Logger.Level.WARNING, "rank " + r + ": " + failed
            + "; every rank of this communicator is a node of its own (ranks that name one node must share /dev/shm)");
        String[] own = new String[n];
        for (int p = 0; p < n; p++) own[p] = nodes[p] + "#" + p;
        layout = new NodeLayout(own);
        err = null;
        try {
          local = factory.create(new MeshRendezvous(mesh, new int[] {r}), nodeOptions(o));
        } catch (RuntimeException e) {
          err = "could not build its own shared-memory communicator: " + e.getMessage();
        }
        String again = outcome(rv, r, err, o);
        if (again != null) throw new CommException("rank " + r + ": " + again);
      }
      return assembler.assemble(rv, layout, mesh, local);
    } catch (RuntimeException e) {
      if (local != null) local.close();
      mesh.close();
      throw e;
    }
  }

  /**
   * The options of a node's communicator: full precision, whatever the world's say. Low precision,
   * when on, is the cross-node leg's, chosen per call by the composition (FP8 inside a node as well
   * would add a rounding the LP bound does not allow for).
   */
  static CommOptions nodeOptions(CommOptions o) {
    CommOptions.Builder b = o.toBuilder().lowPrecision(false);
    for (io.sparkcomms.collectives.Collective c : io.sparkcomms.collectives.Collective.values()) {
      if (c.hasLowPrecision()) b.lowPrecision(c, false);
    }
    return b.build();
  }

  /** One world round of every rank's outcome: null when all succeeded, else the first failure, the same on every rank. */
  static String outcome(Rendezvous rv, int r, String err, CommOptions o) {
    byte[][] st = rv.allGather((err == null ? "OK" : "ERR " + err).getBytes(StandardCharsets.UTF_8), o.timeout());
    for (int p = 0; p < st.length; p++) {
      String s = new String(st[p], StandardCharsets.UTF_8);
      if (s.startsWith("ERR ")) return "rank " + p + ": " + s.substring(4);
      if (!s.equals("OK")) throw new CommException("rank " + r + ": rank " + p + " sent an unreadable creation status");
    }
    return null;
  }

  private static long badId() { throw new IllegalArgumentException("world id"); }

  private static String checkName(String what, String s, int max) {
    if (s == null || s.isEmpty() || s.length() > max) throw new IllegalArgumentException(what + " empty or longer than " + max);
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      if (c < 0x21 || c > 0x7e) throw new IllegalArgumentException(what + " '" + s + "' has a character outside printable ASCII");
    }
    return s;
  }
}
