package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.BatchSendRecv;
import io.sparkcomms.collectives.CallOptions;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.collectives.gpu.DeviceTensor;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.gpu.VendorGroup;
import io.sparkcomms.collectives.net.Mesh;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.time.Duration;
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
 * Host tensors are staged through device buffers of this communicator. Not across nodes on the GPU
 * backend (refused on every rank with a clear error): allToAllV, point-to-point, split, FP8 on the
 * cross-node leg.
 */
public final class GpuHierarchicalCommunicator extends AbstractCommunicator {
  private final NodeLayout layout;
  private final Mesh mesh;
  private final GpuCommunicator local;
  private final VendorGroup rail;   // this rank's rail (equal nodes), the leaders' rail (uneven, leaders), or null
  private final VendorGroup world;
  private final int device;
  private final CallAgreement agreement;
  private final boolean uniform;
  private final Map<DataType, DeviceBuffer[]> scratch = new EnumMap<>(DataType.class);
  private long calls;
  private volatile Duration callTimeout;
  private long stepNanos;
  private volatile boolean aborted;

  GpuHierarchicalCommunicator(int rank, CommOptions options, NodeLayout layout, Mesh mesh, GpuCommunicator local,
                              VendorGroup rail, VendorGroup world) {
    super(rank, layout.worldSize(), options, new BackendOffer(BackendOffer.Memory.DEVICE, local.device(), true, false, false),
        PairDirectory.fresh(), true);
    this.layout = layout;
    this.mesh = mesh;
    this.local = local;
    this.rail = rail;
    this.world = world;
    this.device = local.device();
    this.agreement = new CallAgreement(rank, layout, mesh);
    this.uniform = layout.uniform();
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

  @Override protected Protocol transfer(List<BatchSendRecv.Transfer> ops, Duration t) {
    throw new UnsupportedOperationException("point-to-point between ranks of a GPU communicator that spans nodes is not "
        + "supported; use allToAll or the host backend");
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
    try {
      agreement.agree(loc, call * 16, stepNanos, CallAgreement.describe(p), problem, "refused its arguments");
    } catch (CommMismatchException | IllegalArgumentException e) {
      throw e;  // every rank raised at this call; the communicator stays usable
    } catch (RuntimeException e) {
      throw failed(p, e);
    } catch (Error e) {
      throw failed(p, e);
    }
    try {
      return run(loc, p);
    } catch (RuntimeException e) {
      throw failed(p, e);
    } catch (Error e) {
      throw failed(p, e);
    }
  }

  /** What this composition cannot run, or tensors it cannot take (the same verdict the agreement spreads). */
  private String refusal(PlannedCall p) {
    if (p.kind() == Collective.ALL_TO_ALL_V) return "allToAllV is not supported across nodes on the GPU backend";
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
  private Protocol run(Communicator loc, PlannedCall p) {
    if (p.kind() == Collective.BARRIER) return Protocol.FLAT;
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
    if (win != null) VendorGroup.convert(slice(in, 0, win.count()), win, s);
    if (in != null && in == out) wout = win.count() >= outExtent(p) ? slice(win, 0, outExtent(p)) : wout;
    Protocol pr = runOnDevice(loc, p, DataType.FLOAT32, win, wout);
    if (out != null && written(p)) {
      VendorGroup.convert(wout, slice(out, 0, wout.count()), s);
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
        return allReduce(loc, slice(in, 0, c), slice(out, 0, c), p.op(), c);
      case REDUCE: {
        DeviceTensor target = rank == p.root() ? slice(out, 0, c) : scratch(dt, c, 3);
        return allReduce(loc, slice(in, 0, c), target, p.op(), c);
      }
      case REDUCE_SCATTER:
        world.reduceScatter(slice(in, 0, c * n), slice(out, 0, c), p.op(), s);
        await(s, "reduceScatter");
        return Protocol.VENDOR;
      case REDUCE_SCATTER_V: {
        PerRankCounts pc = p.counts();
        DeviceTensor all = scratch(dt, pc.total(), 3);
        Protocol pr = allReduce(loc, slice(in, 0, pc.total()), all, p.op(), pc.total());
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

  private Protocol allReduce(Communicator loc, DeviceTensor in, DeviceTensor out, ReduceOp op, long c) {
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
      rail.allReduce(shard, shard, railOp, s);
      if (avg) VendorGroup.divide(shard, size, s);
      await(rail, s, "allReduce (rail)");
      if (c % l == 0) loc.allGather(shard, out);
      else loc.allGatherV(shard, out, counts);
      return Protocol.TREE;
    }
    loc.allReduce(in, out, localOp);
    if (uniform) {
      rail.allReduce(out, out, railOp, s);
      if (avg) VendorGroup.divide(out, size, s);
      await(rail, s, "allReduce (rail)");
    } else {
      if (rail != null) {
        rail.allReduce(out, out, railOp, s);
        if (avg) VendorGroup.divide(out, size, s);
        await(rail, s, "allReduce (leaders' rail)");
      }
      loc.broadcast(out, 0);
    }
    return Protocol.FLAT;
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
    DeviceBuffer[] bs = scratch.computeIfAbsent(dt, k -> new DeviceBuffer[6]);
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
    if (n > 0) VendorGroup.copy(slice(from, at, n), slice(to, toAt, n), s);
  }

  /** Which ranks form this rank's groups (for messages). */
  @Override public String toString() {
    return "GpuHierarchicalCommunicator(rank " + rank + " of " + size + ", " + layout + ", rail "
        + (rail == null ? "none" : rail.rank() + "/" + rail.size()) + ", world " + Arrays.toString(new int[] {world.rank(), world.size()}) + ")";
  }
}
