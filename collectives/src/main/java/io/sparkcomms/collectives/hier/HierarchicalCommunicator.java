package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.BatchSendRecv;
import io.sparkcomms.collectives.CallOptions;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Fnv;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.algo.AlgorithmSelector;
import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.host.HostReductions;
import io.sparkcomms.collectives.lp.BlockQuantizer;
import io.sparkcomms.collectives.net.Mesh;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * A communicator whose ranks span several nodes: the ranks of one node share a host shared-memory
 * communicator ({@code local}); the nodes talk over a {@link Mesh} on a network transport. World rank
 * order is the caller's (the Spark partition order); nodes may hold different numbers of ranks.
 *
 * <p>Every call starts with an agreement that doubles as its fingerprint check and makes every
 * later step unconditional: the local ranks compare the call's description (a local allReduce of its
 * hash and of a flag for a local argument problem), the node leaders exchange their descriptions,
 * and each leader broadcasts the verdict to its node. Ranks that disagree anywhere, or a rank whose
 * arguments are refused, make the call fail on every rank of every node ({@link CommMismatchException};
 * the refused rank raises {@link IllegalArgumentException}), and the communicator stays usable. After
 * the agreement only an abort or a timeout can fail a call, and either aborts every rank: this rank
 * tells every other rank through the mesh, and each aborts its node's communicator, which wakes the
 * ranks waiting there.
 *
 * <p>Algorithms (the cross-node leg is one all-to-all exchange among the ranks involved):
 * <ul>
 *   <li>allReduce, small or on uneven nodes: local reduce to the leader, leaders exchange and reduce
 *       in node order (so every leader computes the same bits), local broadcast.
 *   <li>allReduce from {@link #SHARD_MIN_BYTES} on nodes of equal size: local reduce-scatter, each shard
 *       reduced across nodes on its rail (the ranks of the same local rank), local allGather: every
 *       rank's link carries 1/s of the data.
 *   <li>allGather(V): local allGather(V), leaders exchange node blocks, local broadcast of the whole.
 *   <li>broadcast: local broadcast on the root's node, its leader sends to every other leader, local
 *       broadcast there. reduce, gather, scatter, reduceScatter(V) are composed from these with a
 *       local copy (their traffic is that of allReduce, allGather or broadcast).
 *   <li>allToAll(V): directly between every pair of ranks over the mesh; allToAllV agrees on its size
 *       verdict before any output is written.
 *   <li>barrier: the agreement itself.
 * </ul>
 * AVG is a sum divided by the world size once, at the end; BF16/FP16 reduce in FP32 on both legs and
 * round once, INT32 AVG sums in INT64 (the shared-memory collectives' accumulation).
 * With low precision on for allReduce (and the host policy choosing LP for the call) the cross-node
 * leg carries FP8 with a scale per block. Point-to-point transfers go directly between the two ranks
 * over the mesh. Not composed across nodes: split.
 */
public final class HierarchicalCommunicator extends AbstractCommunicator {
  /** From this many bytes (and on nodes of equal size) allReduce shards its cross-node leg over every rank's link. */
  public static final long SHARD_MIN_BYTES = 256 * 1024;

  private final NodeLayout layout;
  private final Mesh mesh;
  private final Communicator local;
  private final int node;
  private final boolean leader;
  private final int[] leaders;
  private final int[] rail;  // the shard rail of this rank's local rank, or null (uneven nodes)
  private final HostReductions reductions = new HostReductions();
  private final CallAgreement agreement;
  /** Transfers made with each peer so far (the sequence number of the next); also the point-to-point lock. */
  private final long[] pairSeq;
  private long calls;
  private volatile Duration callTimeout;
  /** The bound of each wait of the current call (every step gets the whole timeout, as each local step does). */
  private long stepNanos;
  /** Whether the current allReduce crosses nodes as FP8 (decided in the agreement). */
  private boolean lowPrecision;
  private volatile boolean aborted;

  HierarchicalCommunicator(int rank, CommOptions options, NodeLayout layout, Mesh mesh, Communicator local) {
    super(rank, layout.worldSize(), options, BackendOffer.HOST, PairDirectory.fresh(), true);
    this.layout = layout;
    this.mesh = mesh;
    this.local = local;
    this.node = layout.nodeOf(rank);
    this.leader = layout.localRank(rank) == 0;
    this.leaders = layout.leaders();
    this.rail = layout.uniform() ? layout.rail(layout.localRank(rank)) : null;
    this.pairSeq = new long[layout.worldSize()];
    this.agreement = new CallAgreement(rank, layout, mesh);
    mesh.onAbort(reason -> {
      aborted = true;
      local.abort(reason);
    });
  }

  /** Which node each rank runs on. */
  public NodeLayout layout() { return layout; }

  @Override public String backendName() { return "host+net"; }

  @Override public void abort(String reason) {
    aborted = true;
    mesh.abort(reason);
    local.abort(reason);
    abortChildren(reason);
  }

  @Override public boolean isAborted() { return aborted || mesh.isAborted() || local.isAborted(); }

  @Override protected String abortReason() {
    String r = mesh.abortReason();
    return r != null ? r : "a rank aborted it, or a call failed";
  }

  @Override protected void useCallTimeout(Duration t) { callTimeout = t; }

  @Override protected AbstractCommunicator createChild(Rendezvous rv) {
    throw new UnsupportedOperationException("split of a communicator that spans nodes is not supported: split the node's "
        + "own communicator, or build one per group");
  }

  @Override protected void release() {
    try {
      local.close();
    } finally {
      mesh.close();
    }
  }

  // ------------------------------------------------------------------ point-to-point

  /**
   * Transfers over the mesh, directly between the two ranks whatever their nodes. The i-th transfer
   * between two ranks is one message each way: the sender's carries its dtype, count and data, the
   * receiver's its dtype and count; each side checks the other's, so a recv whose dtype or count
   * differs from its send, two sends or two recvs, or a tensor one side refuses fail on both sides
   * ({@link CommMismatchException}; the refusing side raises {@link IllegalArgumentException}). Every
   * message of a batch is sent before any is awaited, so a batch cannot deadlock; with one peer, the
   * transfers from the lower rank to the higher come first, each direction in the order added (the
   * shared-memory backend's order). A transfer whose peer never comes times out and aborts. The base
   * class runs it in call order, as one call of this communicator.
   */
  @Override protected Protocol transfer(List<BatchSendRecv.Transfer> ops, Duration t) {
    if (isAborted()) throw new CommAbortedException("rank " + rank + ": communicator aborted: " + abortReason());
    List<BatchSendRecv.Transfer> order = new ArrayList<>(ops);
    order.sort(Comparator.comparingInt((BatchSendRecv.Transfer x) -> x.peer())
        .thenComparingInt(x -> (x.send() ? rank < x.peer() : x.peer() < rank) ? 0 : 1));
    synchronized (pairSeq) {
      long[] seqs = new long[order.size()];
      String[] problems = new String[order.size()];
      RuntimeException first = null;
      try {
        for (int i = 0; i < order.size(); i++) {
          BatchSendRecv.Transfer x = order.get(i);
          seqs[i] = pairSeq[x.peer()]++;
          problems[i] = refused(x);
          mesh.send(x.peer(), Mesh.P2P, seqs[i], transferMessage(x, problems[i]));
        }
        long deadline = System.nanoTime() + t.toNanos();
        for (int i = 0; i < order.size(); i++) {
          BatchSendRecv.Transfer x = order.get(i);
          ByteBuffer b = mesh.take(x.peer(), Mesh.P2P, seqs[i], deadline);
          RuntimeException e = matchTransfer(x, problems[i], b);
          // a mismatch or a refused tensor both sides see alike; anything else (an unreadable message) only this one
          if (e != null && !(e instanceof CommMismatchException) && !(e instanceof IllegalArgumentException)) throw e;
          if (first == null) first = e;
        }
      } catch (RuntimeException | Error e) {
        // not an outcome both sides agree on (a timeout, an abort, a bad frame, a message that cannot be built): abort
        try {
          abort((order.get(0).send() ? "send" : "recv") + " failed on rank " + rank + ": " + e);
        } catch (RuntimeException suppressed) {
          e.addSuppressed(suppressed);
        }
        throw e;
      }
      if (first != null) throw first;  // both sides raise at this transfer; the communicator stays usable
      return Protocol.FLAT;
    }
  }

  /** Why this rank cannot take part in {@code t} with its tensor, or null. */
  private String refused(BatchSendRecv.Transfer t) {
    String name = t.send() ? "send" : "recv";
    if (t.tensor() == null) return name + ": tensor is null";
    if (!(t.tensor() instanceof HostTensor h)) return name + ": a device tensor; a communicator across nodes takes host tensors";
    if (!t.send() && !h.isWritable()) return name + ": the receive buffer is read-only";
    if (t.tensor().count() * t.tensor().dtype().size() > Integer.MAX_VALUE - 64 * 1024) {
      return name + ": " + t.tensor().count() + " elements: more than one message carries (2 GB)";
    }
    return null;
  }

  /** role, dtype, count, problem text, then the data of a send. */
  private static ByteBuffer transferMessage(BatchSendRecv.Transfer t, String problem) {
    byte[] why = problem == null ? new byte[0] : problem.getBytes(StandardCharsets.UTF_8);
    int count = problem == null ? (int) t.tensor().count() : 0;
    int dt = problem == null ? t.tensor().dtype().ordinal() : -1;
    int data = problem == null && t.send() ? count * t.tensor().dtype().size() : 0;
    ByteBuffer b = ByteBuffer.allocate(1 + 4 + 8 + 4 + why.length + data).order(ByteOrder.nativeOrder());
    b.put((byte) (t.send() ? 1 : 0)).putInt(dt).putLong(count).putInt(why.length).put(why);
    if (data > 0) ((HostTensor) t.tensor()).copyTo(0, count, b, b.position());
    return b.position(0);
  }

  /** The outcome of {@code t} given the peer's message: null when it matched (a recv's data is then in place). */
  private RuntimeException matchTransfer(BatchSendRecv.Transfer t, String mine, ByteBuffer b) {
    String name = t.send() ? "send" : "recv";
    b.order(ByteOrder.nativeOrder());
    if (b.remaining() < 17) return new CommException("rank " + rank + ": rank " + t.peer() + " sent an unreadable transfer message");
    boolean peerSends = b.get() == 1;
    int dt = b.getInt();
    long count = b.getLong();
    int whyLen = b.getInt();
    if (whyLen < 0 || whyLen > b.remaining()) return new CommException("rank " + rank + ": rank " + t.peer() + " sent an unreadable transfer message");
    byte[] why = new byte[whyLen];
    b.get(why);
    if (mine != null) return new IllegalArgumentException(mine);
    if (whyLen > 0) {
      return new CommMismatchException("rank " + rank + ": " + name + " with rank " + t.peer() + ": the peer refused its tensor: "
          + new String(why, StandardCharsets.UTF_8));
    }
    if (peerSends == t.send()) {
      return new CommMismatchException("rank " + rank + ": " + name + " with rank " + t.peer() + ": both ranks " + name
          + " (a send needs the peer's recv)");
    }
    DataType mineDt = t.tensor().dtype();
    if (dt != mineDt.ordinal() || count != t.tensor().count()) {
      String other = dt >= 0 && dt < DataType.values().length ? DataType.values()[dt].toString() : "?";
      return new CommMismatchException("rank " + rank + ": " + name + " of " + t.tensor().count() + " " + mineDt + " with rank "
          + t.peer() + ", whose " + (peerSends ? "send" : "recv") + " has " + count + " " + other);
    }
    if (!t.send()) {
      if (b.remaining() != count * mineDt.size()) return new CommException("rank " + rank + ": rank " + t.peer() + " sent a block whose length is not its count");
      ((HostTensor) t.tensor()).copyFrom(b, b.position(), 0, (int) count);
    }
    return null;
  }

  // ------------------------------------------------------------------ dispatch

  @Override protected Protocol execute(PlannedCall p) {
    if (isAborted()) {
      aborted = true;
      throw new CommAbortedException("rank " + rank + ": communicator aborted: " + abortReason());
    }
    long call = calls++;
    stepNanos = timeout().toNanos();
    Communicator loc = callTimeout == null ? local : local.withOptions(CallOptions.timeout(callTimeout));
    String problem = p.problem();
    if (problem == null) problem = HostReductions.aliasingProblem(p, rank);
    // the protocol from agreed values only (count, dtype, op, request; the options were compared at
    // creation), and part of the description, so that ranks cannot run different ones
    lowPrecision = problem == null && p.kind() == Collective.ALL_REDUCE && AlgorithmSelector.choose(Collective.ALL_REDUCE,
        p.count() * p.dtype().size(), size, p.dtype(), p.op(), p.request(), options) == Protocol.LP;
    try {
      agree(loc, call, 0, CallAgreement.describe(p) + (lowPrecision ? " LP" : "") + (p.request() != null ? " " + p.request() : ""), problem);
    } catch (CommMismatchException | IllegalArgumentException e) {
      throw e;  // every rank raised at this call; the communicator stays usable
    } catch (RuntimeException e) {
      throw failed(p, e);
    } catch (Error e) {
      throw failed(p, e);
    }
    try {
      return run(loc, call, p);
    } catch (CommCapacityException e) {
      throw e;  // an agreed verdict (allToAllV sizes)
    } catch (RuntimeException e) {
      throw failed(p, e);
    } catch (Error e) {
      throw failed(p, e);
    }
  }

  private <T extends Throwable> T failed(PlannedCall p, T e) {
    try {
      abort(p.kind().apiName() + " failed on rank " + rank + ": " + e);
    } catch (RuntimeException t) {
      e.addSuppressed(t);
    }
    return e;
  }

  private Duration timeout() { Duration t = callTimeout; return t != null ? t : options.timeout(); }

  private Protocol run(Communicator loc, long call, PlannedCall p) {
    HostTensor in = (HostTensor) p.in(), out = (HostTensor) p.out();
    int n = size;
    switch (p.kind()) {
      case BARRIER:
        return Protocol.FLAT;
      case ALL_REDUCE:
        return allReduce(loc, call, in, out, p.op(), (int) p.count(), lowPrecision);
      case REDUCE: {
        HostTensor tmp = HostTensor.allocate(p.dtype(), (int) p.count());
        Protocol pr = allReduce(loc, call, in, tmp, p.op(), (int) p.count(), false);
        if (rank == p.root()) copy(tmp, 0, out, 0, (int) p.count());
        return pr;
      }
      case REDUCE_SCATTER: {
        int c = (int) p.count();
        HostTensor tmp = HostTensor.allocate(p.dtype(), c * n);
        Protocol pr = allReduce(loc, call, prefix(in, c * n), tmp, p.op(), c * n, false);
        copy(tmp, (long) rank * c, out, 0, c);
        return pr;
      }
      case REDUCE_SCATTER_V: {
        PerRankCounts pc = p.counts();
        int total = (int) pc.total();
        HostTensor tmp = HostTensor.allocate(p.dtype(), total);
        Protocol pr = allReduce(loc, call, prefix(in, total), tmp, p.op(), total, false);
        copy(tmp, pc.start(rank), out, 0, (int) pc.count(rank));
        return pr;
      }
      case ALL_GATHER: {
        long[] counts = new long[n];
        java.util.Arrays.fill(counts, p.count());
        allGather(loc, call, in, out, PerRankCounts.of(counts, n));
        return Protocol.FLAT;
      }
      case ALL_GATHER_V:
        allGather(loc, call, in, out, p.counts());
        return Protocol.FLAT;
      case GATHER: {
        int c = (int) p.count();
        long[] counts = new long[n];
        java.util.Arrays.fill(counts, c);
        HostTensor all = rank == p.root() ? out : HostTensor.allocate(p.dtype(), c * n);
        allGather(loc, call, in, all, PerRankCounts.of(counts, n));
        return Protocol.FLAT;
      }
      case BROADCAST:
        broadcast(loc, call, in, out, p.root(), (int) p.count());
        return Protocol.FLAT;
      case SCATTER: {
        int c = (int) p.count();
        HostTensor all = HostTensor.allocate(p.dtype(), c * n);
        broadcast(loc, call, rank == p.root() ? prefix(in, c * n) : all, all, p.root(), c * n);
        copy(all, (long) rank * c, out, 0, c);
        return Protocol.FLAT;
      }
      case ALL_TO_ALL: {
        int c = (int) p.count();
        long[] counts = new long[n], offs = new long[n];
        for (int j = 0; j < n; j++) {
          counts[j] = c;
          offs[j] = (long) j * c;
        }
        allToAll(loc, call, in, counts, offs, out, offs, null);
        return Protocol.FLAT;
      }
      case ALL_TO_ALL_V:
        return allToAllV(loc, call, p);
      default:
        throw new AssertionError(p.kind());
    }
  }

  // ------------------------------------------------------------------ agreement

  /** The call's agreement ({@link CallAgreement}): returns when every rank of every node makes this call with its arguments accepted. */
  private void agree(Communicator loc, long call, int step, String description, String problem) {
    agreement.agree(loc, seq(call, step), stepNanos, description, problem, "refused its arguments");
  }

  /** {@link #agree} where a set {@code problem} is described to the other nodes as a rank that {@code refusal}. */
  private void agree(Communicator loc, long call, int step, String description, String problem, String refusal) {
    agreement.agree(loc, seq(call, step), stepNanos, description, problem, refusal);
  }

  private static long seq(long call, int step) { return call * 16 + step; }

  /** The deadline of a wait that starts now. */
  private long deadline() { return System.nanoTime() + stepNanos; }

  // ------------------------------------------------------------------ the cross-node exchange

  /** {@link CallAgreement#exchange} with this call's step bound. */
  private ByteBuffer[] exchange(int[] members, int me, byte channel, long seq, ByteBuffer mine) {
    return agreement.exchange(members, me, channel, seq, mine, stepNanos);
  }

  private static ByteBuffer expect(ByteBuffer b, long bytes, int from) {
    if (b.remaining() != bytes) {
      throw new CommException("rank " + from + " sent " + b.remaining() + " bytes where " + bytes + " were agreed");
    }
    return b.order(ByteOrder.nativeOrder());
  }

  // ------------------------------------------------------------------ algorithms

  private Protocol allReduce(Communicator loc, long call, HostTensor in, HostTensor out, ReduceOp op, int c, boolean lp) {
    DataType dt = in.dtype();
    if (op.kind() == ReduceOp.Kind.AVG && dt == DataType.INT32) {
      // exact: the sum of INT32 inputs in INT64, divided once, then wrapped as a flat INT32 AVG is
      long[] wide = new long[c];
      for (int i = 0; i < c; i++) wide[i] = (long) in.getDouble(i);
      HostTensor w = HostTensor.of(wide);
      Protocol p = allReduce(loc, call, w, w, op, c, lp);
      for (int i = 0; i < c; i++) out.setDouble(i, (int) wide[i]);
      return p;
    }
    if (dt == DataType.BFLOAT16 || dt == DataType.FLOAT16) {
      // accumulate in FP32 across both legs and round once, as the shared-memory collectives do
      float[] wide = new float[c];
      for (int i = 0; i < c; i++) wide[i] = (float) in.getDouble(i);
      HostTensor w = HostTensor.of(wide);
      Protocol p = allReduce(loc, call, w, w, op, c, lp);
      for (int i = 0; i < c; i++) out.setDouble(i, wide[i]);
      return p;
    }
    boolean avg = op.kind() == ReduceOp.Kind.AVG;
    ReduceOp nodeOp = avg ? ReduceOp.SUM : op;  // PREMUL_SUM scales each rank's input once, in its node
    ReduceOp crossOp = avg || op.kind() == ReduceOp.Kind.PREMUL_SUM ? ReduceOp.SUM : op;
    lp = lp && dt == DataType.FLOAT32 && crossOp.kind() == ReduceOp.Kind.SUM;  // what FP8 on the wire takes
    long bytes = (long) c * dt.size();
    int s = layout.nodeSize(node);
    if (rail != null && s > 1 && bytes >= SHARD_MIN_BYTES && c >= s) {
      long[] counts = new long[s];
      for (int k = 0; k < s; k++) counts[k] = c / s + (k < c % s ? 1 : 0);
      int lr = layout.localRank(rank);
      HostTensor shard = HostTensor.allocate(dt, (int) counts[lr]);
      loc.reduceScatterV(prefix(in, c), shard, counts, nodeOp);
      ByteBuffer sum = crossNode(call, rail, node, Mesh.SHARDS, shard, crossOp, avg, lp);
      shard.copyFrom(sum, 0, 0, (int) counts[lr]);
      loc.allGatherV(shard, out, counts);
      return lp ? Protocol.LP : Protocol.TREE;
    }
    HostTensor acc = HostTensor.allocate(dt, c);
    loc.reduce(prefix(in, c), acc, nodeOp, 0);
    if (leader) {
      ByteBuffer sum = crossNode(call, leaders, node, Mesh.LEADERS, acc, crossOp, avg, lp);
      acc.copyFrom(sum, 0, 0, c);
    }
    loc.broadcast(acc, out, 0);
    return lp ? Protocol.LP : Protocol.FLAT;
  }

  /**
   * Every member's {@code part} reduced in member order with {@code op} (then divided by the world
   * size for AVG). With {@code lp} (FLOAT32 parts, a sum) each part crosses as FP8 codes with a scale
   * per block ({@link BlockQuantizer}) and the decoded parts are summed in FP32: one FP8 rounding of
   * each node's (or shard's) sum, a quarter of the bytes on the network.
   */
  private ByteBuffer crossNode(long call, int[] members, int me, byte channel, HostTensor part, ReduceOp op, boolean avg,
      boolean lp) {
    DataType dt = part.dtype();
    int c = (int) part.count();
    ByteBuffer sum = ByteBuffer.allocate(c * dt.size()).order(ByteOrder.nativeOrder());
    if (lp && dt == DataType.FLOAT32 && op.kind() == ReduceOp.Kind.SUM) {
      BlockQuantizer q = new BlockQuantizer(Thresholds.fp8Format(options), Thresholds.lpBlockSize(options));
      float[] mine = new float[c];
      for (int k = 0; k < c; k++) mine[k] = (float) part.getDouble(k);
      ByteBuffer enc = ByteBuffer.allocate(q.encodedBytes(c));
      q.quantize(mine, 0, c, enc, 0);
      ByteBuffer[] all = exchange(members, me, channel, seq(call, 1), enc);
      float[] acc = new float[c], one = new float[c];
      for (int i = 0; i < all.length; i++) {
        ByteBuffer b = expect(all[i], q.encodedBytes(c), members[i]);
        ByteBuffer own = ByteBuffer.allocate(b.remaining());
        own.put(b.duplicate()).flip();
        q.dequantize(own, 0, c, one, 0);
        for (int k = 0; k < c; k++) acc[k] += one[k];
      }
      sum.asFloatBuffer().put(acc);
    } else {
      long bytes = (long) c * dt.size();
      ByteBuffer[] all = exchange(members, me, channel, seq(call, 1), bytesOf(part, 0, c));
      for (int i = 0; i < all.length; i++) expect(all[i], bytes, members[i]);
      reductions.reduce(dt, op, all, c, sum);
    }
    if (avg) divide(sum, dt, c, size);
    return sum;
  }

  private void allGather(Communicator loc, long call, HostTensor in, HostTensor out, PerRankCounts pc) {
    DataType dt = in.dtype();
    int[] mine = layout.members(node);
    long[] localCounts = new long[mine.length];
    long blockCount = 0;
    for (int k = 0; k < mine.length; k++) {
      localCounts[k] = pc.count(mine[k]);
      blockCount += localCounts[k];
    }
    HostTensor block = HostTensor.allocate(dt, (int) blockCount);
    loc.allGatherV(prefix(in, pc.count(rank)), block, localCounts);
    HostTensor all = HostTensor.allocate(dt, (int) pc.total());
    if (leader) {
      ByteBuffer[] blocks = exchange(leaders, node, Mesh.LEADERS, seq(call, 1), bytesOf(block, 0, (int) blockCount));
      for (int i = 0; i < blocks.length; i++) {
        int[] m = layout.members(i);
        long bytes = 0;
        for (int r : m) bytes += pc.count(r) * dt.size();
        ByteBuffer b = expect(blocks[i], bytes, leaders[i]);
        int at = b.position();
        for (int r : m) {
          all.copyFrom(b, at, pc.start(r), (int) pc.count(r));
          at += (int) (pc.count(r) * dt.size());
        }
      }
    }
    loc.broadcast(all, out, 0);
  }

  private void broadcast(Communicator loc, long call, HostTensor in, HostTensor out, int root, int c) {
    DataType dt = in.dtype();
    int rootNode = layout.nodeOf(root);
    HostTensor data = HostTensor.allocate(dt, c);
    if (node == rootNode) {
      loc.broadcast(rank == root ? prefix(in, c) : data, data, layout.localRank(root));
      if (leader) {
        ByteBuffer b = bytesOf(data, 0, c);
        for (int i = 0; i < leaders.length; i++) if (i != node) mesh.send(leaders[i], Mesh.LEADERS, seq(call, 1), b.duplicate());
      }
      copy(data, 0, out, 0, c);
      return;
    }
    if (leader) {
      ByteBuffer b = expect(mesh.take(leaders[rootNode], Mesh.LEADERS, seq(call, 1), deadline()), (long) c * dt.size(), leaders[rootNode]);
      data.copyFrom(b, b.position(), 0, c);
    }
    loc.broadcast(data, out, 0);
  }

  private Protocol allToAllV(Communicator loc, long call, PlannedCall p) {
    HostTensor in = (HostTensor) p.in(), out = (HostTensor) p.out();
    Splits sp = p.splits();
    int n = size;
    long[] sc = new long[n], so = new long[n], ro = sp.hasOffsets() ? new long[n] : null;
    long at = 0;
    for (int j = 0; j < n; j++) {
      sc[j] = (long) ((HostTensor) sp.sendCounts()).getDouble(j);
      so[j] = sp.hasOffsets() ? (long) ((HostTensor) sp.sendOffsets()).getDouble(j) : at;
      at += Math.max(0, sc[j]);
      if (ro != null) ro[j] = (long) ((HostTensor) sp.recvOffsets()).getDouble(j);
    }
    allToAll(loc, call, in, sc, so, out, ro, (HostTensor) sp.recvCounts());
    return Protocol.FLAT;
  }

  /**
   * Block j ({@code counts[j]} elements at {@code sendOffs[j]}) of {@code in} to rank j; the block from
   * rank i lands at {@code recvOffs[i]} of {@code out}, or packed in rank order when {@code recvOffs} is
   * null. With {@code recvCounts} (allToAllV) the received counts are written there and every rank
   * agrees on the sizes before any output is written.
   */
  private void allToAll(Communicator loc, long call, HostTensor in, long[] counts, long[] sendOffs, HostTensor out, long[] recvOffs,
      HostTensor recvCounts) {
    int n = size;
    DataType dt = (in != null ? in : out).dtype();
    int es = dt.size();
    String problem = null;
    for (int j = 0; j < n && problem == null; j++) {
      if (counts[j] < 0 || sendOffs[j] < 0 || sendOffs[j] + counts[j] > in.count()) {
        problem = "allToAllV: rank " + rank + "'s block for rank " + j + " (" + counts[j] + " elements at " + sendOffs[j]
            + ") runs outside its input of " + in.count();
      }
    }
    // each block: its count, whether the sender's own blocks are bad (then no data), the data
    for (int j = 0; j < n; j++) {
      if (j == rank) continue;
      int len = problem != null ? 0 : (int) (counts[j] * es);
      ByteBuffer b = ByteBuffer.allocate(9 + len).order(ByteOrder.nativeOrder());
      b.putLong(counts[j]).put((byte) (problem != null ? 1 : 0));
      if (len > 0) in.copyTo(sendOffs[j], (int) counts[j], b, 9);
      mesh.send(j, Mesh.WORLD, seq(call, 1), b.position(0));
    }
    ByteBuffer[] got = new ByteBuffer[n];
    long[] rc = new long[n];
    boolean[] bad = new boolean[n];
    long deadline = deadline();
    for (int i = 0; i < n; i++) {
      if (i == rank) {
        rc[i] = counts[i];
        bad[i] = problem != null;
        if (problem == null) got[i] = bytesOf(in, sendOffs[i], (int) counts[i]);
        continue;
      }
      ByteBuffer b = mesh.take(i, Mesh.WORLD, seq(call, 1), deadline).order(ByteOrder.nativeOrder());
      if (b.remaining() < 9) throw new CommException("rank " + i + " sent an allToAll block without its count");
      rc[i] = b.getLong(b.position());
      bad[i] = b.get(b.position() + 8) != 0;
      long expect = bad[i] || rc[i] < 0 ? 0 : rc[i] * es;
      if ((!bad[i] && rc[i] > Integer.MAX_VALUE / es) || b.remaining() != 9 + expect) {
        throw new CommException("rank " + i + " sent a block whose length is not its count");
      }
      if (recvCounts == null && (bad[i] || rc[i] != counts[i])) {
        throw new CommException("rank " + i + " sent " + rc[i] + " elements where the agreed allToAll moves " + counts[i]);
      }
      b.position(b.position() + 9);
      got[i] = b.slice().order(ByteOrder.nativeOrder());
    }
    long[][] slots = new long[n][];
    String verdict = problem != null ? problem : receiveVerdict(rank, rc, bad, recvOffs, out.count(), slots);
    if (verdict != null && recvCounts == null) throw new CommException("allToAll: " + verdict);
    if (recvCounts != null) for (int i = 0; i < n; i++) recvCounts.setDouble(i, Math.max(rc[i], 0));
    if (recvCounts != null) {
      try {
        agree(loc, call, 2, "allToAllV sizes", verdict, "found a size problem");
      } catch (IllegalArgumentException | CommMismatchException e) {
        throw new CommCapacityException(verdict != null ? verdict : e.getMessage());
      }
    }
    for (int i = 0; i < n; i++) if (rc[i] > 0) out.copyFrom(got[i], got[i].position(), slots[i][0], (int) rc[i]);
  }

  /**
   * Where each received block of an allToAll(V) lands on this receiver ({@code slots[i] = {start, end,
   * i}}: at {@code recvOffs[i]}, or packed in rank order when null) and its first size problem, or null:
   * a sender whose own blocks are bad or whose count is negative, a block past the output of
   * {@code outCount} elements, blocks at given offsets that overlap. Shared by the host and GPU compositions.
   */
  static String receiveVerdict(int rank, long[] rc, boolean[] bad, long[] recvOffs, long outCount, long[][] slots) {
    int n = rc.length;
    long end = 0;
    for (int i = 0; i < n; i++) {
      if (bad[i] || rc[i] < 0) return "allToAllV: rank " + i + "'s blocks run outside its input (or a count is negative)";
      long start = recvOffs != null ? recvOffs[i] : end;
      end = start + rc[i];
      if (start < 0 || end > outCount) {
        return "allToAllV: rank " + rank + " would receive " + rc[i] + " elements from rank " + i + " at " + start
            + ", past its output of " + outCount;
      }
      slots[i] = new long[] {start, end, i};
    }
    if (recvOffs == null) return null;
    // blocks that land at given offsets must not overlap one another
    long[][] sorted = java.util.Arrays.stream(slots).filter(x -> x[1] > x[0]).sorted(Comparator.comparingLong(x -> x[0]))
        .toArray(long[][]::new);
    for (int k = 1; k < sorted.length; k++) {
      if (sorted[k][0] < sorted[k - 1][1]) {
        return "allToAllV: on rank " + rank + " the block from rank " + sorted[k][2] + " (at " + sorted[k][0]
            + ") overlaps the block from rank " + sorted[k - 1][2] + " (ending at " + sorted[k - 1][1] + ")";
      }
    }
    return null;
  }

  // ------------------------------------------------------------------ elements

  /** The first {@code c} elements of {@code t} as a tensor of their own (a copy when {@code t} holds more). */
  private static HostTensor prefix(HostTensor t, long c) {
    if (t.count() == c) return t;
    HostTensor p = HostTensor.allocate(t.dtype(), (int) c);
    copy(t, 0, p, 0, (int) c);
    return p;
  }

  private static ByteBuffer bytesOf(HostTensor t, long from, int n) {
    ByteBuffer b = ByteBuffer.allocate(n * t.dtype().size()).order(ByteOrder.nativeOrder());
    t.copyTo(from, n, b, 0);
    return b;
  }

  private static void copy(HostTensor from, long at, HostTensor to, long toAt, int n) {
    if (n == 0) return;
    to.copyFrom(bytesOf(from, at, n), 0, toAt, n);
  }

  /** Divides every element by {@code n} (AVG's last step), rounding once to the dtype. */
  private static void divide(ByteBuffer b, DataType dt, int c, int n) {
    for (int i = 0; i < c; i++) {
      switch (dt) {
        case FLOAT32 -> b.putFloat(i * 4, b.getFloat(i * 4) / n);
        case FLOAT64 -> b.putDouble(i * 8, b.getDouble(i * 8) / n);
        case BFLOAT16 -> b.putShort(i * 2, HalfFloats.floatToBf16(HalfFloats.bf16ToFloat(b.getShort(i * 2)) / n));
        case FLOAT16 -> b.putShort(i * 2, HalfFloats.floatToFp16(HalfFloats.fp16ToFloat(b.getShort(i * 2)) / n));
        case INT32 -> b.putInt(i * 4, b.getInt(i * 4) / n);
        case INT64 -> b.putLong(i * 8, b.getLong(i * 8) / n);
        default -> throw new AssertionError(dt);
      }
    }
  }
}
