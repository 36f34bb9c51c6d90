package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.Algorithm;
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
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.collectives.gpu.DeviceOps;
import io.sparkcomms.collectives.gpu.DeviceTensor;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.gpu.VendorGroup;
import io.sparkcomms.collectives.net.Mesh;
import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.CallPlanner;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * The GPU composition of a communicator whose ranks span nodes: the ranks of one node share a GPU
 * communicator ({@code local}: DDA over peer memory), and the vendor library (NCCL / RCCL) carries
 * the cross-node leg, in {@link VendorGroup}s: one rail per local rank (the ranks of that local rank
 * on every node) and one group of the whole world. World rank order is the caller's (the Spark
 * partition order).
 *
 * <p>Every call starts with the {@link CallAgreement} over the node-local communicator and the
 * leaders' mesh (the host composition's), so ranks that disagree anywhere fail on every rank
 * before any data moves ({@link CommMismatchException}), and a failure after it aborts every rank:
 * the mesh tells every other rank, which aborts its local communicator and its vendor groups (an
 * aborted group ends its kernels). Every wait on the vendor library is bounded by the call's
 * timeout ({@link VendorGroup#await}).
 *
 * <ul>
 *   <li>allReduce from {@link HierarchicalCommunicator#SHARD_MIN_BYTES} on nodes of equal size: local
 *       reduce-scatter (DDA), each shard allReduced on its rail, all rails at once, local allGather
 *       (DDA): every rank's link carries 1/s of the data.
 *   <li>allReduce below that, equal nodes: local allReduce, then every rail allReduces the whole
 *       vector (each rank ends with the result; no local broadcast). Uneven nodes: local allReduce,
 *       the leaders' rail, local broadcast.
 *   <li>AVG sums on both legs and divides by the world size once at the end; PREMUL_SUM scales on the
 *       local leg. bf16 and fp16 reductions run in FP32 on every leg and round once.
 *   <li>allGather, reduceScatter, broadcast, allToAll on the world group (the vendor library's own
 *       topology-aware algorithms); reduce, gather, scatter, allGatherV and reduceScatterV composed
 *       from them with device copies; barrier: the agreement itself.
 * </ul>
 * allToAllV agrees on its sizes over the mesh, then runs as one group of the vendor library's sends
 * and receives, as point-to-point batches do ({@link #transfer}). Host tensors are staged through
 * device buffers of this communicator. With low precision on for allReduce (a forced LP, or AUTO
 * from the LP threshold) its cross-node leg carries FP8 with a scale per block: each node's (or
 * shard's) sum quantized once, decoded and added in node order in FP32. Not across nodes: split.
 */
public final class GpuHierarchicalCommunicator extends AbstractCommunicator {
  /**
   * Scratch slots per dtype: 0-1 host staging (the call's dtype), 2 a shard, 3 a rooted or V call's
   * whole result, 4-5 the FP32 copies of a widened bf16/fp16 call, 6-7 the FP8 leg (INT32 words; FP32 decoded).
   */
  private static final int LP_SLOT = 6;
  private final NodeLayout layout;
  private final Mesh mesh;
  private final GpuCommunicator local;
  private final VendorGroup rail;   // this rank's rail (equal nodes), the leaders' rail (uneven, leaders), or null
  private final VendorGroup world;
  private final int device;
  private final CallAgreement agreement;
  private final boolean uniform;
  private final Map<DataType, DeviceBuffer[]> scratch = new EnumMap<>(DataType.class);
  /** Transfers made with each peer so far (the sequence number of the next); also the point-to-point lock. */
  private final long[] pairSeq;
  private long calls;
  private volatile Duration callTimeout;
  private long stepNanos;
  private volatile boolean aborted;
  /** Whether the current allReduce crosses nodes as FP8 (decided in the agreement). */
  private boolean lowPrecision;

  GpuHierarchicalCommunicator(int rank, CommOptions options, NodeLayout layout, Mesh mesh, GpuCommunicator local,
                              VendorGroup rail, VendorGroup world) {
    super(rank, layout.worldSize(), options, new BackendOffer(BackendOffer.Memory.DEVICE, local.device(), true, true, false),
        PairDirectory.fresh(), true);
    this.layout = layout;
    this.mesh = mesh;
    this.local = local;
    this.rail = rail;
    this.world = world;
    this.device = local.device();
    this.agreement = new CallAgreement(rank, layout, mesh);
    this.uniform = layout.uniform();
    this.pairSeq = new long[layout.worldSize()];
    mesh.onAbort(reason -> {
      aborted = true;
      abortParts(reason);
    });
  }

  /** Which node each rank runs on. */
  public NodeLayout layout() { return layout; }

  @Override public String backendName() { return "gpu+net"; }

  @Override public void abort(String reason) {
    aborted = true;
    mesh.abort(reason);
    abortParts(reason);
    abortChildren(reason);
  }

  private void abortParts(String reason) {
    local.abort(reason);
    if (rail != null) rail.abort();
    world.abort();
  }

  @Override public boolean isAborted() {
    return aborted || mesh.isAborted() || local.isAborted() || world.isAborted() || (rail != null && rail.isAborted());
  }

  @Override protected String abortReason() {
    String r = mesh.abortReason();
    return r != null ? r : "a rank aborted it, or a call failed";
  }

  @Override protected void useCallTimeout(Duration t) { callTimeout = t; }

  @Override protected AbstractCommunicator createChild(Rendezvous rv) {
    throw new UnsupportedOperationException("split of a GPU communicator that spans nodes is not supported: split the node's "
        + "own communicator, or build one per group");
  }

  /**
   * Point-to-point over the world group, directly between the two ranks whatever their nodes. First
   * each transfer's description (role, dtype, count, or why this rank refuses its tensor) goes to the
   * peer over the mesh, the i-th transfer between two ranks one message each way, and each side checks
   * the other's: a recv whose dtype or count differs from its send, two sends or two recvs, or a
   * refused tensor fail on both sides ({@link CommMismatchException}; the refusing side raises
   * {@link IllegalArgumentException}) before any data moves, and the communicator stays usable. Then
   * the batch runs as one group of the vendor library's sends and receives (host tensors staged through
   * device buffers). With one peer, the transfers from the lower rank to the higher come first, each
   * direction in the order added. A timeout or an abort aborts every rank.
   */
  @Override protected Protocol transfer(List<BatchSendRecv.Transfer> ops, Duration t) {
    if (isAborted()) throw new CommAbortedException("rank " + rank + ": communicator aborted: " + abortReason());
    List<BatchSendRecv.Transfer> order = new ArrayList<>(ops);
    order.sort(Comparator.comparingInt((BatchSendRecv.Transfer x) -> x.peer())
        .thenComparingInt(x -> (x.send() ? rank < x.peer() : x.peer() < rank) ? 0 : 1));
    synchronized (pairSeq) {
      RuntimeException first = null;
      List<DeviceBuffer> staged = new ArrayList<>();
      try {
        long[] seqs = new long[order.size()];
        String[] problems = new String[order.size()];
        for (int i = 0; i < order.size(); i++) {
          BatchSendRecv.Transfer x = order.get(i);
          seqs[i] = pairSeq[x.peer()]++;
          problems[i] = refusedTransfer(x);
          mesh.send(x.peer(), Mesh.P2P, seqs[i], describe(x, problems[i]));
        }
        long deadline = System.nanoTime() + t.toNanos();
        for (int i = 0; i < order.size(); i++) {
          BatchSendRecv.Transfer x = order.get(i);
          RuntimeException e = match(x, problems[i], mesh.take(x.peer(), Mesh.P2P, seqs[i], deadline));
          if (e != null && !(e instanceof CommMismatchException) && !(e instanceof IllegalArgumentException)) throw e;
          if (first == null) first = e;
        }
        if (first != null) throw first;  // both sides raise at this transfer; the communicator stays usable
        int k = order.size();
        boolean[] sends = new boolean[k];
        int[] peers = new int[k];
        long[] addresses = new long[k], bytes = new long[k];
        DeviceTensor[] dev = new DeviceTensor[k];
        long s = local.streamAddress();
        for (int i = 0; i < k; i++) {
          BatchSendRecv.Transfer x = order.get(i);
          Tensor tensor = x.tensor();
          if (tensor instanceof HostTensor h) {
            DeviceBuffer b = DeviceBuffer.allocate(h.dtype(), Math.max(1, h.count()), device);
            staged.add(b);
            dev[i] = b.view(0, h.count());
            if (x.send()) dev[i].copyFrom(h);
          } else {
            dev[i] = (DeviceTensor) tensor;
          }
          sends[i] = x.send();
          peers[i] = x.peer();
          addresses[i] = dev[i].address();
          bytes[i] = dev[i].count() * dev[i].dtype().size();
        }
        world.batch(sends, peers, addresses, bytes, s);
        world.await(s, t, order.get(0).send() ? "send" : "recv", () -> !mesh.isAborted() && !local.isAborted());
        for (int i = 0; i < k; i++) if (!sends[i] && order.get(i).tensor() instanceof HostTensor h) dev[i].copyTo(h);
        return Protocol.VENDOR;
      } catch (CommMismatchException | IllegalArgumentException e) {
        if (e == first) throw e;
        throw failedTransfer(order, e);
      } catch (RuntimeException e) {
        throw failedTransfer(order, e);
      } catch (Error e) {
        throw failedTransfer(order, e);
      } finally {
        for (DeviceBuffer b : staged) b.close();
      }
    }
  }

  /** Not an outcome both sides agree on (a timeout, an abort, a bad message): aborts every rank. */
  private <T extends Throwable> T failedTransfer(List<BatchSendRecv.Transfer> order, T e) {
    try {
      abort((order.get(0).send() ? "send" : "recv") + " failed on rank " + rank + ": " + e);
    } catch (RuntimeException suppressed) {
      e.addSuppressed(suppressed);
    }
    return e;
  }

  /** Why this rank cannot take part in {@code t} with its tensor, or null. */
  private String refusedTransfer(BatchSendRecv.Transfer t) {
    String name = t.send() ? "send" : "recv";
    if (t.tensor() == null) return name + ": tensor is null";
    if (t.tensor() instanceof DeviceTensor d && d.device() != device) return name + ": tensor on device " + d.device() + ", communicator on " + device;
    if (!t.send() && t.tensor() instanceof HostTensor h && !h.isWritable()) return name + ": the receive buffer is read-only";
    return null;
  }

  /** role, dtype, count, problem text. */
  private static ByteBuffer describe(BatchSendRecv.Transfer t, String problem) {
    byte[] why = problem == null ? new byte[0] : problem.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(1 + 4 + 8 + 4 + why.length);
    b.put((byte) (t.send() ? 1 : 0)).putInt(problem == null ? t.tensor().dtype().ordinal() : -1)
        .putLong(problem == null ? t.tensor().count() : 0).putInt(why.length).put(why);
    return b.flip();
  }

  /** The outcome of {@code t} given the peer's description: null when they match. */
  private RuntimeException match(BatchSendRecv.Transfer t, String mine, ByteBuffer b) {
    String name = t.send() ? "send" : "recv";
    if (b.remaining() < 17) return new CommException("rank " + rank + ": rank " + t.peer() + " sent an unreadable transfer message");
    boolean peerSends = b.get() == 1;
    int dt = b.getInt();
    long count = b.getLong();
    int whyLen = b.getInt();
    if (whyLen < 0 || whyLen != b.remaining()) return new CommException("rank " + rank + ": rank " + t.peer() + " sent an unreadable transfer message");
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
    return null;
  }

  @Override protected void release() {
    try {
      for (DeviceBuffer[] bs : scratch.values()) for (DeviceBuffer b : bs) if (b != null) b.close();
      if (rail != null) rail.close();
      world.close();
      local.close();
    } finally {
      mesh.close();
    }
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
    if (problem == null) problem = refusal(p);
    // the protocol from agreed values only (count, dtype, op, request; the options were compared at
    // creation), and part of the description, so that ranks cannot run different ones
    lowPrecision = problem == null && lowPrecisionChosen(p);
    String description = CallAgreement.describe(p) + (lowPrecision ? " LP" : "") + (p.request() != null ? " " + p.request() : "");
    try {
      agreement.agree(loc, call * 16, stepNanos, description, problem, "refused its arguments");
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
      throw e;  // an agreed verdict (allToAllV sizes): every rank raises it, the communicator stays usable
    } catch (RuntimeException e) {
      throw failed(p, e);
    } catch (Error e) {
      throw failed(p, e);
    }
  }

  /** FP8 on allReduce's cross-node leg: a forced LP, or AUTO with low precision on from its threshold (fp32 / bf16, SUM / AVG). */
  private boolean lowPrecisionChosen(PlannedCall p) {
    if (p.kind() != Collective.ALL_REDUCE || !CallPlanner.lowPrecisionEligible(Collective.ALL_REDUCE, p.dtype(), p.op())) return false;
    if (p.request() == Algorithm.LP) return true;
    return p.request() == Algorithm.AUTO && options.lowPrecisionEnabled(Collective.ALL_REDUCE) && p.messageBytes() >= Thresholds.lpMinBytes(options);
  }

  /** A setting of the node's GPU communicator as it is in effect (e.g. {@code "lp_block_size"}). */
  public long option(String key) { return local.option(key); }

  /** Tensors this composition cannot take (the same verdict the agreement spreads). */
  private String refusal(PlannedCall p) {
    for (Tensor t : new Tensor[] {p.in(), p.out()}) {
      if (t instanceof DeviceTensor d && d.device() != device) return "rank " + rank + ": tensor on device " + d.device() + ", communicator on " + device;
    }
    if (p.in() != null && p.out() != null && p.in().isDevice() != p.out().isDevice()) {
      return "rank " + rank + ": input and output must both be device tensors or both host tensors";
    }
    return null;
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

  /** Host tensors: copied to device buffers of this communicator, run, copied back (a null side stays null). */
  private Protocol run(Communicator loc, long call, PlannedCall p) {
    if (p.kind() == Collective.BARRIER) return Protocol.FLAT;
    if (p.kind() == Collective.ALL_TO_ALL_V) return allToAllV(loc, call, p);
    if (!(p.in() instanceof HostTensor) && !(p.out() instanceof HostTensor)) {
      return widened(loc, p, (DeviceTensor) p.in(), (DeviceTensor) p.out());
    }
    HostTensor hin = (HostTensor) p.in(), hout = (HostTensor) p.out();
    long inN = inExtent(p), outN = outExtent(p);
    DeviceTensor din = hin == null ? null : scratch(p.dtype(), inN, 0);
    DeviceTensor dout = hout == null ? null : hout == hin ? scratch(p.dtype(), Math.max(inN, outN), 0) : scratch(p.dtype(), outN, 1);
    if (hout == hin && din != null) din = slice(dout, 0, inN);
    if (din != null) din.copyFrom(hin, inN);
    Protocol pr = widened(loc, p, din, dout == null ? null : slice(dout, 0, outN));
    if (dout != null && written(p)) dout.copyTo(hout, outN);
    return pr;
  }

  /** A non-root's output of reduce and gather is left as it was. */
  private boolean written(PlannedCall p) {
    return (p.kind() != Collective.REDUCE && p.kind() != Collective.GATHER) || rank == p.root();
  }

  /** Elements of the input a call reads. */
  private long inExtent(PlannedCall p) {
    long c = p.count();
    return switch (p.kind()) {
      case REDUCE_SCATTER, SCATTER, ALL_TO_ALL -> c * size;
      case REDUCE_SCATTER_V -> p.counts().total();
      case ALL_GATHER_V -> p.counts().count(rank);
      default -> c;
    };
  }

  /** Elements of the output a call writes. */
  private long outExtent(PlannedCall p) {
    long c = p.count();
    return switch (p.kind()) {
      case ALL_GATHER, GATHER, ALL_TO_ALL -> c * size;
      case REDUCE_SCATTER_V -> p.counts().count(rank);
      case ALL_GATHER_V -> p.counts().total();
      default -> c;
    };
  }

  /**
   * bf16 and fp16 reductions run in FP32 on every leg and round once (as the shared-memory and DDA
   * collectives accumulate): widened into device buffers, reduced, narrowed into the output.
   */
  private Protocol widened(Communicator loc, PlannedCall p, DeviceTensor in, DeviceTensor out) {
    DataType dt = p.dtype();
    if (p.op() == null || (dt != DataType.BFLOAT16 && dt != DataType.FLOAT16)) return runOnDevice(loc, p, dt, in, out);
    long s = local.streamAddress();
    DeviceTensor win = in == null ? null : scratch(DataType.FLOAT32, inExtent(p), 4);
    DeviceTensor wout = out == null ? null : scratch(DataType.FLOAT32, outExtent(p), 5);
    if (win != null) DeviceOps.convert(slice(in, 0, win.count()), win, s);
    if (in != null && in == out) wout = win.count() >= outExtent(p) ? slice(win, 0, outExtent(p)) : wout;
    Protocol pr = runOnDevice(loc, p, DataType.FLOAT32, win, wout);
    if (out != null && written(p)) {
      DeviceOps.convert(wout, slice(out, 0, wout.count()), s);
      sync(s, p.kind().apiName());
    }
    return pr;
  }

  private Protocol runOnDevice(Communicator loc, PlannedCall p, DataType dt, DeviceTensor in, DeviceTensor out) {
    int n = size;
    long s = local.streamAddress();
    long c = p.count();
    switch (p.kind()) {
      case ALL_REDUCE:
        return allReduce(loc, slice(in, 0, c), slice(out, 0, c), p.op(), c, lowPrecision);
      case REDUCE: {
        DeviceTensor target = rank == p.root() ? slice(out, 0, c) : scratch(dt, c, 3);
        return allReduce(loc, slice(in, 0, c), target, p.op(), c, false);
      }
      case REDUCE_SCATTER:
        world.reduceScatter(slice(in, 0, c * n), slice(out, 0, c), p.op(), s);
        await(s, "reduceScatter");
        return Protocol.VENDOR;
      case REDUCE_SCATTER_V: {
        PerRankCounts pc = p.counts();
        DeviceTensor all = scratch(dt, pc.total(), 3);
        Protocol pr = allReduce(loc, slice(in, 0, pc.total()), all, p.op(), pc.total(), false);
        copy(all, pc.start(rank), out, 0, pc.count(rank), s);
        sync(s, "reduceScatterV");
        return pr;
      }
      case ALL_GATHER:
        world.allGather(slice(in, 0, c), slice(out, 0, c * n), s);
        await(s, "allGather");
        return Protocol.VENDOR;
      case GATHER: {
        DeviceTensor all = rank == p.root() ? slice(out, 0, c * n) : scratch(dt, c * n, 2);
        world.allGather(slice(in, 0, c), all, s);
        await(s, "gather");
        return Protocol.VENDOR;
      }
      case ALL_GATHER_V: {
        // every block padded to the largest, one allGather, then each block moved to its place
        PerRankCounts pc = p.counts();
        long m = Math.max(1, pc.max());
        DeviceTensor mine = scratch(dt, m, 2), all = scratch(dt, m * n, 3);
        copy(in, 0, mine, 0, pc.count(rank), s);
        world.allGather(mine, all, s);
        await(s, "allGatherV");
        for (int r = 0; r < n; r++) copy(all, r * m, out, pc.start(r), pc.count(r), s);
        sync(s, "allGatherV");
        return Protocol.VENDOR;
      }
      case BROADCAST:
        world.broadcast(slice(in, 0, c), slice(out, 0, c), p.root(), s);
        await(s, "broadcast");
        return Protocol.VENDOR;
      case SCATTER: {
        DeviceTensor all = scratch(dt, c * n, 2);
        world.broadcast(rank == p.root() ? slice(in, 0, c * n) : all, all, p.root(), s);
        await(s, "scatter");
        copy(all, rank * c, out, 0, c, s);
        sync(s, "scatter");
        return Protocol.VENDOR;
      }
      case ALL_TO_ALL:
        world.allToAll(slice(in, 0, c * n), slice(out, 0, c * n), s);
        await(s, "allToAll");
        return Protocol.VENDOR;
      default:
        throw new AssertionError(p.kind());
    }
  }

  // ------------------------------------------------------------------ allReduce

  private Protocol allReduce(Communicator loc, DeviceTensor in, DeviceTensor out, ReduceOp op, long c, boolean lp) {
    long s = local.streamAddress();
    DataType dt = in.dtype();
    boolean avg = op.kind() == ReduceOp.Kind.AVG;
    // AVG: sums on both legs, one division at the end; PREMUL_SUM: the factor on the local leg
    ReduceOp localOp = avg ? ReduceOp.SUM : op;
    ReduceOp railOp = avg || op.kind() == ReduceOp.Kind.PREMUL_SUM ? ReduceOp.SUM : op;
    int l = layout.nodeSize(layout.nodeOf(rank));
    if (uniform && c * dt.size() >= HierarchicalCommunicator.SHARD_MIN_BYTES && c >= l) {
      long[] counts = new long[l];
      for (int j = 0; j < l; j++) counts[j] = c / l + (j < c % l ? 1 : 0);
      int me = layout.localRank(rank);
      DeviceTensor shard = scratch(dt, counts[me], 2);
      if (c % l == 0) loc.reduceScatter(in, shard, localOp);
      else loc.reduceScatterV(in, shard, counts, localOp);
      railAllReduce(rail, shard, railOp, lp, s);
      if (avg) DeviceOps.divide(shard, size, s);
      await(rail, s, "allReduce (rail)");
      if (c % l == 0) loc.allGather(shard, out);
      else loc.allGatherV(shard, out, counts);
      return lp ? Protocol.LP : Protocol.TREE;
    }
    loc.allReduce(in, out, localOp);
    if (uniform) {
      railAllReduce(rail, out, railOp, lp, s);
      if (avg) DeviceOps.divide(out, size, s);
      await(rail, s, "allReduce (rail)");
    } else {
      if (rail != null) {
        railAllReduce(rail, out, railOp, lp, s);
        if (avg) DeviceOps.divide(out, size, s);
        await(rail, s, "allReduce (leaders' rail)");
      }
      loc.broadcast(out, 0);
    }
    return lp ? Protocol.LP : Protocol.FLAT;
  }

  /**
   * The cross-node leg of allReduce on {@code g}, in place on {@code buf}: the vendor library's
   * allReduce, or with {@code lp} FP8 with a scale per block (the node's GPU communicator's block
   * size and format): each member's sum quantized once, the encoded blocks allGathered, decoded and
   * added in member order in FP32, so every member computes the same bits.
   */
  private void railAllReduce(VendorGroup g, DeviceTensor buf, ReduceOp op, boolean lp, long s) {
    if (!lp) {
      g.allReduce(buf, buf, op, s);
      return;
    }
    int bs = (int) local.option("lp_block_size"), fmt = (int) local.option("fp8_format");
    long words = DeviceOps.encodedBytes(buf.count(), bs) / 4;
    DeviceTensor enc = scratch(DataType.INT32, words, LP_SLOT), all = scratch(DataType.INT32, words * g.size(), LP_SLOT + 1);
    DeviceOps.quantize(buf, enc, fmt, bs, s);
    g.allGather(enc, all, s);
    DeviceTensor part = scratch(buf.dtype(), buf.count(), LP_SLOT);
    for (int m = 0; m < g.size(); m++) {
      DeviceOps.dequantize(slice(all, m * words, words), m == 0 ? buf : part, fmt, bs, s);
      if (m > 0) DeviceOps.add(part, buf, s);
    }
  }

  // ------------------------------------------------------------------ allToAllV

  /**
   * allToAllV over the world group: the sizes first (each rank's count for each peer, or that its own
   * blocks run outside its input, over the mesh), the receive counts written, every rank's size verdict
   * agreed ({@link CommCapacityException} on every rank when any receiver's output cannot take its
   * blocks, before any data moves), then one group of sends and receives. Counts and offsets may be
   * host or device tensors; so may the data (host data staged through device buffers).
   */
  private Protocol allToAllV(Communicator loc, long call, PlannedCall p) {
    Splits sp = p.splits();
    int n = size;
    long[] sc = words(sp.sendCounts(), n), so = sp.hasOffsets() ? words(sp.sendOffsets(), n) : new long[n];
    long[] ro = sp.hasOffsets() ? words(sp.recvOffsets(), n) : null;
    long inCount = p.in().count(), outCount = p.out().count();
    String problem = null;
    long at = 0;
    for (int j = 0; j < n; j++) {
      if (!sp.hasOffsets()) so[j] = at;
      at += Math.max(0, sc[j]);
      if (problem == null && (sc[j] < 0 || so[j] < 0 || so[j] + sc[j] > inCount)) {
        problem = "allToAllV: rank " + rank + "'s block for rank " + j + " (" + sc[j] + " elements at " + so[j]
            + ") runs outside its input of " + inCount;
      }
    }
    for (int j = 0; j < n; j++) {
      if (j == rank) continue;
      ByteBuffer b = ByteBuffer.allocate(9).putLong(sc[j]).put((byte) (problem != null ? 1 : 0)).flip();
      mesh.send(j, Mesh.WORLD, call * 16 + 1, b);
    }
    long[] rc = new long[n];
    boolean[] bad = new boolean[n];
    long deadline = System.nanoTime() + stepNanos;
    for (int i = 0; i < n; i++) {
      if (i == rank) {
        rc[i] = sc[i];
        bad[i] = problem != null;
        continue;
      }
      ByteBuffer b = mesh.take(i, Mesh.WORLD, call * 16 + 1, deadline);
      if (b.remaining() != 9) throw new CommException("rank " + rank + ": rank " + i + " sent an unreadable allToAllV size message");
      rc[i] = b.getLong();
      bad[i] = b.get() != 0;
    }
    long[][] slots = new long[n][];
    String verdict = problem != null ? problem : HierarchicalCommunicator.receiveVerdict(rank, rc, bad, ro, outCount, slots);
    long[] written = new long[n];
    for (int i = 0; i < n; i++) written[i] = Math.max(rc[i], 0);
    setWords(sp.recvCounts(), written);
    try {
      agreement.agree(loc, call * 16 + 2, stepNanos, "allToAllV sizes", verdict, "found a size problem");
    } catch (IllegalArgumentException | CommMismatchException e) {
      throw new CommCapacityException(verdict != null ? verdict : e.getMessage());
    }
    // the sizes hold on every rank: one group of sends and receives (a block to itself too)
    long s = local.streamAddress();
    DataType dt = p.dtype();
    int es = dt.size();
    DeviceTensor in = p.in() instanceof HostTensor h ? scratch(dt, inCount, 0) : (DeviceTensor) p.in();
    DeviceTensor out = p.out() instanceof HostTensor ? scratch(dt, outCount, 1) : (DeviceTensor) p.out();
    if (p.in() instanceof HostTensor h) in.copyFrom(h, inCount);
    if (p.out() instanceof HostTensor h) out.copyFrom(h, outCount);  // elements outside the blocks are left as they were
    List<long[]> ops = new ArrayList<>();  // {send 1 / recv 0, peer, address, bytes}
    for (int j = 0; j < n; j++) if (sc[j] > 0) ops.add(new long[] {1, j, in.address() + so[j] * es, sc[j] * es});
    for (int i = 0; i < n; i++) if (rc[i] > 0) ops.add(new long[] {0, i, out.address() + slots[i][0] * es, rc[i] * es});
    boolean[] sends = new boolean[ops.size()];
    int[] peers = new int[ops.size()];
    long[] addresses = new long[ops.size()], bytes = new long[ops.size()];
    for (int k = 0; k < ops.size(); k++) {
      long[] o = ops.get(k);
      sends[k] = o[0] == 1;
      peers[k] = (int) o[1];
      addresses[k] = o[2];
      bytes[k] = o[3];
    }
    world.batch(sends, peers, addresses, bytes, s);
    await(s, "allToAllV");
    if (p.out() instanceof HostTensor h) out.copyTo(h, outCount);
    return Protocol.VENDOR;
  }

  /** {@code n} INT64 words of a host or device tensor. */
  private static long[] words(Tensor t, int n) {
    long[] w = new long[n];
    if (t instanceof DeviceTensor d) {
      d.copyTo(HostTensor.of(w), n);
    } else {
      HostTensor h = (HostTensor) t;
      for (int i = 0; i < n; i++) w[i] = (long) h.getDouble(i);
    }
    return w;
  }

  private static void setWords(Tensor t, long[] w) {
    if (t instanceof DeviceTensor d) {
      d.copyFrom(HostTensor.of(w), w.length);
    } else {
      HostTensor h = (HostTensor) t;
      for (int i = 0; i < w.length; i++) h.setDouble(i, w[i]);
    }
  }

  // ------------------------------------------------------------------ device helpers

  /** Waits for the world group's work on {@code s}, bounded by the call's timeout; a failure aborts the groups. */
  private void await(long s, String what) { await(world, s, what); }

  private void await(VendorGroup g, long s, String what) {
    g.await(s, Duration.ofNanos(stepNanos), what, () -> !mesh.isAborted() && !local.isAborted());
  }

  /** Waits for device copies on {@code s} (bounded like the vendor work). */
  private void sync(long s, String what) { await(s, what); }

  private DeviceTensor scratch(DataType dt, long count, int slot) {
    DeviceBuffer[] bs = scratch.computeIfAbsent(dt, k -> new DeviceBuffer[8]);
    long need = Math.max(1, count);
    if (bs[slot] == null || bs[slot].count() < need) {
      if (bs[slot] != null) bs[slot].close();  // every earlier call completed: calls are synchronous
      bs[slot] = null;
      bs[slot] = DeviceBuffer.allocate(dt, need, device);
    }
    return bs[slot].view(0, count);
  }

  private static DeviceTensor slice(DeviceTensor t, long from, long count) {
    if (t == null) return null;
    if (from == 0 && count == t.count()) return t;
    return DeviceTensor.wrap(t.address() + from * t.dtype().size(), t.dtype(), count, t.device());
  }

  private static void copy(DeviceTensor from, long at, DeviceTensor to, long toAt, long n, long s) {
    if (n > 0) DeviceOps.copy(slice(from, at, n), slice(to, toAt, n), s);
  }

  /** Which ranks form this rank's groups (for messages). */
  @Override public String toString() {
    return "GpuHierarchicalCommunicator(rank " + rank + " of " + size + ", " + layout + ", rail "
        + (rail == null ? "none" : rail.rank() + "/" + rail.size()) + ", world " + Arrays.toString(new int[] {world.rank(), world.size()}) + ")";
  }
}
