package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Fnv;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.net.Mesh;
import io.sparkcomms.collectives.plan.PlannedCall;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The agreement every call of a communicator across nodes starts with, which doubles as its
 * fingerprint check and makes every later step unconditional: the ranks of each node compare the
 * call's description (a node-local allReduce MAX of its hash, its negation and a flag for a local
 * argument problem), the node leaders exchange descriptions and node verdicts over the mesh, and each
 * leader broadcasts the verdict to its node. Ranks that disagree anywhere, or a rank whose arguments
 * are refused, make the call fail on every rank of every node ({@link CommMismatchException}; the
 * refused rank raises {@link IllegalArgumentException}); the communicator stays usable. The node-local
 * steps run on host tensors, which every backend takes. Shared by the host and GPU compositions.
 */
final class CallAgreement {
  /** Status words a leader broadcasts to its node: verdict code, text length, text (UTF-8, 8 bytes a word). */
  private static final int STATUS_WORDS = 2 + 128;

  private final int rank;
  private final NodeLayout layout;
  private final Mesh mesh;
  private final int node;
  private final boolean leader;
  private final int[] leaders;

  CallAgreement(int rank, NodeLayout layout, Mesh mesh) {
    this.rank = rank;
    this.layout = layout;
    this.mesh = mesh;
    this.node = layout.nodeOf(rank);
    this.leader = layout.localRank(rank) == 0;
    this.leaders = layout.leaders();
  }

  /**
   * Returns when every rank of every node makes this call with its arguments accepted; otherwise
   * raises on every rank. {@code loc}: this node's communicator (a per-call view with the call's
   * timeout); {@code seq}: the step's sequence number, the same on every rank; a set {@code problem}
   * is described to the other nodes as a rank that {@code refusal} (a leader's own problem travels as
   * its text); each wait lasts at most {@code stepNanos}.
   */
  void agree(Communicator loc, long seq, long stepNanos, String description, String problem, String refusal) {
    long h = Fnv.of(description.getBytes(StandardCharsets.UTF_8)) & Long.MAX_VALUE;
    long[] v = {h, -h, problem != null ? 1 : 0};
    loc.allReduce(HostTensor.of(v), ReduceOp.MAX);
    String ranks = " (world ranks " + java.util.Arrays.toString(layout.members(node)) + ")";
    String nodeVerdict = v[2] != 0 ? (leader && problem != null ? problem : "a rank of node " + layout.nodeName(node) + ranks + " " + refusal)
        : v[0] != -v[1] ? "the ranks of node " + layout.nodeName(node) + ranks + " make different calls" : null;
    long[] status = new long[STATUS_WORDS];
    if (leader) pack(status, leadersAgree(seq, stepNanos, description, nodeVerdict));
    loc.broadcast(HostTensor.of(status), 0);
    if (status[0] != 0) {
      String verdict = unpack(status);
      if (problem != null) throw new IllegalArgumentException(problem);
      throw new CommMismatchException("rank " + rank + ": " + verdict);
    }
  }

  /** The leaders' exchange of descriptions and node verdicts; null when all agree, else the same text on every leader. */
  private String leadersAgree(long seq, long stepNanos, String description, String nodeVerdict) {
    byte[] d = description.getBytes(StandardCharsets.UTF_8);
    byte[] nv = nodeVerdict == null ? new byte[0] : nodeVerdict.getBytes(StandardCharsets.UTF_8);
    ByteBuffer mine = ByteBuffer.allocate(9 + d.length + nv.length);
    mine.put((byte) (nodeVerdict == null ? 0 : 1)).putInt(d.length).put(d).putInt(nv.length).put(nv).flip();
    ByteBuffer[] all = exchange(leaders, node, Mesh.LEADERS, seq, mine, stepNanos);
    String[] desc = new String[all.length];
    String first = null;
    for (int i = 0; i < all.length; i++) {
      ByteBuffer b = all[i];
      try {
        boolean failed = b.get() != 0;
        desc[i] = text(b);
        String why = text(b);
        if (failed && first == null) first = why;
      } catch (RuntimeException e) {
        throw new CommException("rank " + rank + ": node leader " + leaders[i] + " sent an unreadable agreement message");
      }
    }
    if (first != null) return first;
    for (int i = 1; i < all.length; i++) {
      if (!desc[i].equals(desc[0])) {
        return "the ranks make different calls: rank " + leaders[0] + " " + desc[0] + ", rank " + leaders[i] + " " + desc[i];
      }
    }
    return null;
  }

  /**
   * Sends {@code mine} to every other member and takes what each sent: result {@code [me]} is
   * {@code mine}. Every member calls it with the same members and sequence number; each wait lasts
   * at most {@code stepNanos}.
   */
  ByteBuffer[] exchange(int[] members, int me, byte channel, long seq, ByteBuffer mine, long stepNanos) {
    for (int i = 0; i < members.length; i++) if (i != me) mesh.send(members[i], channel, seq, mine.duplicate());
    ByteBuffer[] all = new ByteBuffer[members.length];
    all[me] = mine.duplicate();
    long deadline = System.nanoTime() + stepNanos;
    for (int i = 0; i < members.length; i++) if (i != me) all[i] = mesh.take(members[i], channel, seq, deadline);
    return all;
  }

  /** What every rank must agree on: collective, dtype, op, count, root, per-rank counts. */
  static String describe(PlannedCall p) {
    StringBuilder sb = new StringBuilder(p.kind().apiName());
    if (p.kind() == Collective.BARRIER) return sb.toString();
    sb.append('(').append(p.dtype());
    if (p.op() != null) sb.append(", ").append(p.op());
    if (p.kind() != Collective.ALL_TO_ALL_V) sb.append(", count ").append(p.count());
    if (p.kind().isRooted()) sb.append(", root ").append(p.root());
    if (p.counts() != null) sb.append(", counts ").append(Long.toHexString(p.counts().fingerprint()));
    return sb.append(')').toString();
  }

  private static String text(ByteBuffer b) {
    int len = b.getInt();
    if (len < 0 || len > b.remaining() || len > 64 * 1024) throw new IllegalArgumentException("length");
    byte[] t = new byte[len];
    b.get(t);
    return new String(t, StandardCharsets.UTF_8);
  }

  private static void pack(long[] status, String verdict) {
    if (verdict == null) return;
    byte[] t = verdict.getBytes(StandardCharsets.UTF_8);
    int len = Math.min(t.length, (STATUS_WORDS - 2) * 8);
    status[0] = 1;
    status[1] = len;
    for (int i = 0; i < len; i++) status[2 + i / 8] |= (t[i] & 0xffL) << (8 * (i % 8));
  }

  private static String unpack(long[] status) {
    int len = (int) Math.max(0, Math.min(status[1], (STATUS_WORDS - 2) * 8L));
    byte[] t = new byte[len];
    for (int i = 0; i < len; i++) t[i] = (byte) (status[2 + i / 8] >>> (8 * (i % 8)));
    return new String(t, StandardCharsets.UTF_8);
  }
}
