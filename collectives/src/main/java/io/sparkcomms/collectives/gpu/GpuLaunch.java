package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.nativeapi.SparkCommsNative;
import io.sparkcomms.nativeapi.SparkCommsNative.sc_comm;
import org.bytedeco.javacpp.Pointer;

/**
 * The one place that maps a planned call to the C ABI: {@link #plan} asks the native library which
 * protocol the call runs ({@code sc_plan}, with the call's own count argument and its normalized
 * request as {@code SC_ALGO_*}), {@link #start} enqueues it through that protocol's entry point.
 *
 * <p>Entry points: every collective's own {@code sc_*} with the same request that was planned: the
 * library runs what {@code sc_plan} answered for it (both call the same policy). A protocol code
 * outside the ABI's, or one this collective has no entry point for, is an error before anything is
 * launched.
 */
final class GpuLaunch {
  private final sc_comm comm;

  GpuLaunch(sc_comm comm) { this.comm = comm; }

  static int collectiveCode(Collective c) {
    return switch (c) {
      case ALL_REDUCE -> SparkCommsNative.SC_COLL_ALLREDUCE;
      case ALL_GATHER -> SparkCommsNative.SC_COLL_ALLGATHER;
      case REDUCE_SCATTER -> SparkCommsNative.SC_COLL_REDUCESCATTER;
      case ALL_TO_ALL -> SparkCommsNative.SC_COLL_ALLTOALL;
      case BROADCAST -> SparkCommsNative.SC_COLL_BROADCAST;
      case ALL_TO_ALL_V -> SparkCommsNative.SC_COLL_ALLTOALLV;
      case BARRIER -> SparkCommsNative.SC_COLL_BARRIER;
      // composed (GpuComposed): the first kernel a rank runs for them is the agreement allGather
      case REDUCE, GATHER, SCATTER, ALL_GATHER_V, REDUCE_SCATTER_V -> SparkCommsNative.SC_COLL_ALLGATHER;
      // point-to-point (PointToPoint): a broadcast on the pair's channel
      case SEND, RECV, BATCH -> SparkCommsNative.SC_COLL_BROADCAST;
    };
  }

  /** Whether {@code c} has an entry point for protocol {@code p}. */
  static boolean launchable(Collective c, Protocol p) {
    return switch (c) {
      case ALL_REDUCE -> true;
      case ALL_GATHER, REDUCE_SCATTER -> p == Protocol.FLAT || p == Protocol.LP || p == Protocol.VENDOR;
      case ALL_TO_ALL -> p == Protocol.FLAT || p == Protocol.LP;
      case BROADCAST -> p == Protocol.FLAT || p == Protocol.VENDOR;
      case ALL_TO_ALL_V, BARRIER -> p == Protocol.FLAT;
      case REDUCE, GATHER, SCATTER, ALL_GATHER_V, REDUCE_SCATTER_V -> false;  // composed: GpuComposed
      case SEND, RECV, BATCH -> false;  // on the pair's channel: PointToPoint
    };
  }

  /** The op code the ABI gets: the call's, or SUM for collectives without a reduction. */
  private static int opCode(PlannedCall c) { return c.op() == null ? SparkCommsNative.SC_SUM : c.op().kind().code(); }

  /**
   * The protocol {@code c} runs ({@code sc_plan}). Raises as {@link Native#check} does when the
   * library refuses the request (a forced VENDOR without a vendor communicator: SC_ERR_STATE, or
   * SC_ERR_ABORTED / SC_ERR_VENDOR after an abort or without the library; SC_ERR_UNSUPPORTED: a
   * forced LP or VENDOR the collective cannot take), and {@link CommException} for an answer that is
   * not a protocol this collective can launch.
   */
  Protocol plan(PlannedCall c) {
    int[] out = new int[1];
    int st = SparkCommsNative.sc_plan(comm, collectiveCode(c.kind()), c.count(), c.dtype().code(), opCode(c),
        c.request().code(), out);
    Native.check(st, c.kind().apiName() + ": sc_plan(" + c.request() + ")");
    Protocol p = Protocol.ofCode(out[0]);
    if (p == null || !launchable(c.kind(), p)) {
      throw new CommException(c.kind().apiName() + ": sc_plan(" + c.request() + ") answered protocol " + out[0]
          + (p == null ? "" : " (" + p + ")") + ", which " + c.kind().apiName() + " cannot launch here (another library version?)");
    }
    return p;
  }

  /** Enqueues {@code c} (device tensors) on {@code stream} through the entry point of {@code p}; returns the status. */
  int start(PlannedCall c, Protocol p, Pointer stream) {
    Pointer in = pointer(c.in()), out = pointer(c.out());
    int dt = c.dtype().code();
    int op = opCode(c);
    double f = c.op() == null ? 1 : c.op().factor();
    long n = c.count();
    int algo = c.request().code();
    switch (c.kind()) {
      case ALL_REDUCE:
        return SparkCommsNative.sc_allreduce(comm, in, out, n, dt, op, f, algo, stream);
      case ALL_GATHER:
        return SparkCommsNative.sc_allgather(comm, in, out, n, dt, algo, stream);
      case REDUCE_SCATTER:
        return SparkCommsNative.sc_reducescatter(comm, in, out, n, dt, op, f, algo, stream);
      case ALL_TO_ALL:
        return SparkCommsNative.sc_alltoall(comm, in, out, n, dt, algo, stream);
      case BROADCAST:
        return SparkCommsNative.sc_broadcast(comm, in, out, n, dt, c.root(), algo, stream);
      case BARRIER:
        return SparkCommsNative.sc_barrier(comm, stream);
      case ALL_TO_ALL_V: {
        Splits sp = c.splits();
        return SparkCommsNative.sc_alltoallv(comm, in, c.in().count(), pointer(sp.sendCounts()), pointer(sp.sendOffsets()),
            out, c.out().count(), pointer(sp.recvCounts()), pointer(sp.recvOffsets()), dt, stream);
      }
      default:
        throw new AssertionError(c.kind());
    }
  }

  private static Pointer pointer(Tensor t) { return t == null ? null : ((DeviceTensor) t).pointer(); }
}
