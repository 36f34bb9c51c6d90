package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.plan.CallPlanner;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The GPU backend's reduce, gather, scatter, allGatherV and reduceScatterV, composed from the native
 * collectives, each of which keeps its own call header, bounded waits and abort path:
 * <ul>
 *   <li>reduce: allReduce into the root's output (a non-root's result goes to scratch);</li>
 *   <li>gather: allGather into the root's output (a non-root's into scratch);</li>
 *   <li>scatter: the root's size*c elements broadcast into scratch, each rank copies its slice out;</li>
 *   <li>allGatherV: each rank's block padded to the largest count, allGather, blocks copied out;</li>
 *   <li>reduceScatterV: every block padded to the largest count, reduceScatter, own block copied out.</li>
 * </ul>
 * Copies are device-to-device on the call's stream for device tensors, host copies for host tensors
 * (whose collectives are staged as every host-tensor call is).
 *
 * <p>Agreement first: the native call headers compare count, dtype and op of each primitive, but not
 * the root of a reduce nor the counts behind a padded block. So every composed call starts with an
 * allGather of each rank's {@link #WORDS} descriptor words (collective, dtype, op, PREMUL factor,
 * root, count, per-rank counts fingerprint), read on the host: ranks that differ raise
 * {@link CommMismatchException} on every rank, naming both calls, before any data moves. That read
 * makes these calls synchronous, in their async form too.
 *
 * <p>Not thread-safe: calls come one at a time (under the communicator's call lock).
 */
final class GpuComposed implements AutoCloseable {
  /** Descriptor words per rank in the agreement allGather. */
  static final int WORDS = 7;
  private static final long ALIGN = 256;

  /** What the composition needs of its communicator. */
  interface Calls {
    /**
     * Runs a primitive collective on {@code stream}: enqueued for device tensors, completed (staged)
     * for host tensors. Returns the protocol that ran.
     */
    Protocol start(PlannedCall c);

    /** Waits for the stream and raises a device-side timeout or abort. */
    void finish(PlannedCall c);
  }

  private final CallPlanner planner;
  private final int rank;
  private final int size;
  private final int device;
  private DeviceBuffer deviceScratch;
  private ByteBuffer hostScratch;

  GpuComposed(CallPlanner planner, int rank, int size, int device) {
    this.planner = planner;
    this.rank = rank;
    this.size = size;
    this.device = device;
  }

  /** Whether {@code kind} is composed here rather than launched as one native collective. */
  static boolean composes(Collective kind) {
    return kind == Collective.REDUCE || kind == Collective.GATHER || kind == Collective.SCATTER || kind.hasPerRankCounts();
  }

  /**
   * Runs {@code c} (no local problem) with device copies on {@code stream}; returns the protocol of
   * its data step. The primitives take the communicator's algorithm request, as a direct call would.
   */
  Protocol run(PlannedCall c, Calls calls, org.bytedeco.javacpp.Pointer stream) {
    agree(c, calls);
    boolean host = (c.in() != null ? c.in() : c.out()) instanceof HostTensor;
    Mem m = host ? new HostMem() : new DeviceMem(stream);
    DataType dt = c.dtype();
    long n = size, count = c.count();
    boolean isRoot = rank == c.root();
    Protocol p;
    switch (c.kind()) {
      case REDUCE: {
        Tensor out = isRoot ? c.out() : m.region(dt, count, 0, 0);
        p = calls.start(planner.plan(Collective.ALL_REDUCE, c.in(), out, c.op(), 0));
        break;
      }
      case GATHER: {
        Tensor out = isRoot ? c.out() : m.region(dt, n * count, 0, 0);
        p = calls.start(planner.plan(Collective.ALL_GATHER, c.in(), out, null, 0));
        break;
      }
      case SCATTER: {
        Tensor all = m.region(dt, n * count, 0, 0);
        if (isRoot) m.copy(c.in(), 0, all, 0, n * count);
        p = calls.start(planner.plan(Collective.BROADCAST, all, all, null, c.root()));
        m.copy(all, rank * count, c.out(), 0, count);
        break;
      }
      case ALL_GATHER_V: {
        PerRankCounts pc = c.counts();
        long w = pc.max();
        Tensor mine = m.region(dt, w, n * w, 1);
        Tensor all = m.region(dt, n * w, w, 0);
        m.copy(c.in(), 0, mine, 0, pc.count(rank));
        p = calls.start(planner.plan(Collective.ALL_GATHER, mine, all, null, 0));
        for (int q = 0; q < size; q++) m.copy(all, q * w, c.out(), pc.start(q), pc.count(q));
        break;
      }
      case REDUCE_SCATTER_V: {
        PerRankCounts pc = c.counts();
        long w = pc.max();
        Tensor padded = m.region(dt, n * w, w, 0);
        Tensor mine = m.region(dt, w, n * w, 1);
        for (int q = 0; q < size; q++) m.copy(c.in(), pc.start(q), padded, q * w, pc.count(q));
        p = calls.start(planner.plan(Collective.REDUCE_SCATTER, padded, mine, c.op(), 0));
        m.copy(mine, 0, c.out(), 0, pc.count(rank));
        break;
      }
      default:
        throw new AssertionError(c.kind());
    }
    if (!host) calls.finish(c);
    return p;
  }

  /** This rank's descriptor words of {@code c}. */
  static long[] words(PlannedCall c) {
    ReduceOp op = c.op();
    return new long[] {c.kind().ordinal(), c.dtype().ordinal(), op == null ? -1 : op.kind().ordinal(),
        op == null ? 0 : Double.doubleToLongBits(op.factor()), c.root(), c.count(),
        c.counts() == null ? 0 : c.counts().fingerprint()};
  }

  /** The agreement step (class comment): raises {@link CommMismatchException} on every rank when any two ranks differ. */
  private void agree(PlannedCall c, Calls calls) {
    long[] mine = words(c), all = new long[WORDS * size];
    calls.start(planner.plan(Collective.ALL_GATHER, HostTensor.of(mine), HostTensor.of(all), null, 0));
    String bad = disagreement(all, size, rank);
    if (bad != null) throw new CommMismatchException(c.kind().apiName() + ": ranks disagree: " + bad);
  }

  /**
   * The first difference between rank {@code me}'s descriptor words and another rank's, as text, or
   * null when all agree. A peer's words are untrusted: codes outside their enums are shown as numbers.
   */
  static String disagreement(long[] all, int size, int me) {
    for (int q = 0; q < size; q++) {
      for (int i = 0; i < WORDS; i++) {
        if (all[q * WORDS + i] != all[me * WORDS + i]) {
          return "rank " + me + " called " + describe(all, me) + ", rank " + q + " called " + describe(all, q);
        }
      }
    }
    return null;
  }

  private static String describe(long[] all, int q) {
    int b = q * WORDS;
    return name(Collective.values(), all[b]) + "(count=" + all[b + 5] + ", dtype=" + name(DataType.values(), all[b + 1])
        + ", op=" + (all[b + 2] < 0 ? "-" : name(ReduceOp.Kind.values(), all[b + 2])) + ", root=" + all[b + 4]
        + (all[b + 6] == 0 ? "" : ", counts=#" + Long.toHexString(all[b + 6])) + ")";
  }

  private static String name(Enum<?>[] values, long code) {
    return code >= 0 && code < values.length ? values[(int) code].name() : "#" + code;
  }

  /** The memory of one composed call: two scratch regions and copies between a scratch region and a caller's tensor. */
  private interface Mem {
    /** Region {@code which} (0 or 1) of {@code count} elements; {@code otherCount} elements of the other region must fit too. */
    Tensor region(DataType dt, long count, long otherCount, int which);

    /** Copies {@code n} elements from element {@code srcAt} of {@code src} to element {@code dstAt} of {@code dst}. */
    void copy(Tensor src, long srcAt, Tensor dst, long dstAt, long n);
  }

  private static long align(long bytes) { return (bytes + ALIGN - 1) / ALIGN * ALIGN; }

  /** Device scratch (grown, kept), copies on the call's stream. */
  private final class DeviceMem implements Mem {
    private final org.bytedeco.javacpp.Pointer stream;

    DeviceMem(org.bytedeco.javacpp.Pointer stream) { this.stream = stream; }

    @Override public Tensor region(DataType dt, long count, long otherCount, int which) {
      long first = which == 0 ? count : otherCount, at = align(first * dt.size());
      long need = at + (which == 0 ? otherCount : count) * dt.size();
      if (deviceScratch == null || deviceScratch.bytes() < need) {
        // the two regions of a call are asked for with both sizes, so the buffer never grows between them
        if (deviceScratch != null) deviceScratch.close();  // earlier calls of this communicator finished (synchronous)
        deviceScratch = null;
        deviceScratch = DeviceBuffer.allocate(DataType.INT64, (Math.max(need, 1) + 7) / 8, device);
      }
      return deviceScratch.viewBytes(which == 0 ? 0 : at, dt, count);
    }

    @Override public void copy(Tensor src, long srcAt, Tensor dst, long dstAt, long n) {
      if (n == 0) return;
      long es = src.dtype().size();
      DeviceTensor s = (DeviceTensor) src, d = (DeviceTensor) dst;
      Native.check(SparkCommsNative.sc_memcpy_dtod(new AddressPointer(d.address() + dstAt * es),
          new AddressPointer(s.address() + srcAt * es), n * es, stream), "sc_memcpy_dtod");
    }
  }

  /** Host scratch (a direct buffer, grown, kept), host copies to and from it. */
  private final class HostMem implements Mem {
    /** Byte offset in {@link #hostScratch} of each region handed out by this call. */
    private final java.util.IdentityHashMap<Tensor, Long> at = new java.util.IdentityHashMap<>();

    @Override public Tensor region(DataType dt, long count, long otherCount, int which) {
      long first = which == 0 ? count : otherCount, second = align(first * dt.size());
      long need = second + (which == 0 ? otherCount : count) * dt.size();
      if (need > Integer.MAX_VALUE) {
        throw new IllegalArgumentException("host tensors on the GPU backend: this call needs " + need
            + " bytes of host scratch, more than one buffer holds (2 GiB); use device tensors");
      }
      if (hostScratch == null || hostScratch.capacity() < need) {
        if (!at.isEmpty()) throw new IllegalStateException("host scratch regrown while in use");
        hostScratch = ByteBuffer.allocateDirect((int) Math.max(need, 1)).order(ByteOrder.nativeOrder());
      }
      long from = which == 0 ? 0 : second;
      ByteBuffer b = hostScratch.duplicate().position((int) from).limit((int) (from + count * dt.size()));
      HostTensor t = HostTensor.wrap(b, dt);
      at.put(t, from);
      return t;
    }

    @Override public void copy(Tensor src, long srcAt, Tensor dst, long dstAt, long n) {
      if (n == 0) return;
      int es = src.dtype().size();
      Long s = at.get(src), d = at.get(dst);
      if (s != null) ((HostTensor) dst).copyFrom(hostScratch, (int) (s + srcAt * es), dstAt, (int) n);
      else if (d != null) ((HostTensor) src).copyTo(srcAt, (int) n, hostScratch, (int) (d + dstAt * es));
      else throw new IllegalStateException("a host copy without a scratch side");
    }
  }

  /** Frees the device scratch (the stream must be idle). Idempotent. */
  @Override public void close() {
    if (deviceScratch != null) {
      deviceScratch.close();
      deviceScratch = null;
    }
    hostScratch = null;
  }
}
