package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Algorithm;
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
 * agreement round ({@code sc_agree}: an allGather whose call header carries {@link #AGREE_TAG}, so
 * that it never pairs with a peer's direct allGather) of each rank's descriptor words (collective,
 * dtype, op, PREMUL factor, root, count, per-rank counts fingerprint, whether this rank could take its
 * scratch, then every per-rank count), read on the host: ranks that differ raise
 * {@link CommMismatchException} on every rank, naming both calls, before any data moves, and the
 * communicator stays usable. That read makes these calls synchronous, in their async form too. A
 * failure after it (a timeout, a failed copy) aborts the communicator, as a failed kernel does.
 *
 * <p>Memory: the scratch is the communicator's and is kept, at its largest, until it closes: a
 * non-root of gather holds size*count elements, every rank of scatter size*count, of allGatherV and
 * reduceScatterV size*max(counts).
 *
 * <p>Not thread-safe: calls come one at a time (under the communicator's call lock).
 */
final class GpuComposed implements AutoCloseable {
  /** Fixed descriptor words per rank in the agreement round; the per-rank counts follow them. */
  static final int FIXED_WORDS = 8;
  /** The tag of the agreement round's call header ({@code sc_agree}): no direct collective carries it. */
  static final int AGREE_TAG = 0xA5;
  private static final long ALIGN = 256;

  /** What the composition needs of its communicator. */
  interface Calls {
    /**
     * Runs a primitive collective on {@code stream}: enqueued for device tensors, completed (staged)
     * for host tensors. Returns the protocol that ran.
     */
    Protocol start(PlannedCall c);

    /** The protocol the native library would run {@code c} with ({@code sc_plan}). */
    Protocol plan(PlannedCall c);

    /**
     * The agreement round ({@code sc_agree}): every rank's {@code mine} into {@code all}, rank order,
     * completed (read on the host) when it returns.
     */
    void agree(long[] mine, long[] all);

    /** Waits for the stream and raises a device-side timeout or abort. */
    void finish(PlannedCall c);

    /** A step after the agreement failed on this rank: the communicator must not be trusted further. */
    void broken(PlannedCall c, RuntimeException e);
  }

  private final CallPlanner planner;
  private final io.sparkcomms.collectives.CommOptions options;
  private final int rank;
  private final int size;
  private final int device;
  private DeviceBuffer deviceScratch;
  private ByteBuffer hostScratch;

  GpuComposed(CallPlanner planner, io.sparkcomms.collectives.CommOptions options, int rank, int size, int device) {
    this.planner = planner;
    this.options = options;
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
   * its data step. Its scratch is taken before the agreement round, so that a rank that cannot get
   * it says so there and every rank raises, with no data moved. The primitives run in full
   * precision, as on the host backend: allGather, reduceScatter and broadcast their direct algorithm,
   * allReduce the communicator's request unless that is (or the library answers) LP, then the two-shot.
   */
  Protocol run(PlannedCall c, Calls calls, org.bytedeco.javacpp.Pointer stream) {
    boolean host = (c.in() != null ? c.in() : c.out()) instanceof HostTensor;
    Mem m = host ? new HostMem() : new DeviceMem(stream);
    DataType dt = c.dtype();
    long n = size, count = c.count();
    boolean isRoot = rank == c.root();
    PerRankCounts pc = c.counts();
    long w = pc == null ? 0 : pc.max();
    Tensor a = null, b = null;
    RuntimeException local = null;
    try {
      switch (c.kind()) {
        case REDUCE -> a = isRoot ? null : m.region(dt, count, 0, 0);
        case GATHER -> a = isRoot ? null : m.region(dt, n * count, 0, 0);
        case SCATTER -> a = m.region(dt, n * count, 0, 0);
        case ALL_GATHER_V, REDUCE_SCATTER_V -> {
          a = m.region(dt, n * w, w, 0);  // every rank's padded block
          b = m.region(dt, w, n * w, 1);  // this rank's padded block
        }
        default -> throw new AssertionError(c.kind());
      }
    } catch (RuntimeException e) {
      local = e;
    }
    agree(c, calls, local);
    try {
      Protocol p;
      switch (c.kind()) {
        case REDUCE:
          p = calls.start(fullPrecision(Collective.ALL_REDUCE, c.in(), isRoot ? c.out() : a, c.op(), 0, calls));
          break;
        case GATHER:
          p = calls.start(fullPrecision(Collective.ALL_GATHER, c.in(), isRoot ? c.out() : a, null, 0, calls));
          break;
        case SCATTER:
          if (isRoot) m.copy(c.in(), 0, a, 0, n * count);
          p = calls.start(fullPrecision(Collective.BROADCAST, a, a, null, c.root(), calls));
          m.copy(a, rank * count, c.out(), 0, count);
          break;
        case ALL_GATHER_V:
          m.copy(c.in(), 0, b, 0, pc.count(rank));
          p = calls.start(fullPrecision(Collective.ALL_GATHER, b, a, null, 0, calls));
          for (int q = 0; q < size; q++) m.copy(a, q * w, c.out(), pc.start(q), pc.count(q));
          break;
        default:  // REDUCE_SCATTER_V
          for (int q = 0; q < size; q++) m.copy(c.in(), pc.start(q), a, q * w, pc.count(q));
          p = calls.start(fullPrecision(Collective.REDUCE_SCATTER, a, b, c.op(), 0, calls));
          m.copy(b, 0, c.out(), 0, pc.count(rank));
          break;
      }
      if (!host) calls.finish(c);
      return p;
    } catch (RuntimeException e) {
      calls.broken(c, e);
      throw e;
    }
  }

  /** A primitive's plan in full precision (see {@link #run}). */
  private PlannedCall fullPrecision(Collective kind, Tensor in, Tensor out, ReduceOp op, int root, Calls calls) {
    if (kind != Collective.ALL_REDUCE) return planner.plan(kind, in, out, op, root, Algorithm.FLAT);
    Algorithm asked = options.algorithm() == Algorithm.LP ? Algorithm.AUTO : options.algorithm();
    PlannedCall p = planner.plan(kind, in, out, op, root, asked);
    if (p.problem() == null && calls.plan(p) == Protocol.LP) p = planner.plan(kind, in, out, op, root, Algorithm.TREE);
    return p;
  }

  /** This rank's descriptor words of {@code c}: {@link #FIXED_WORDS}, then its per-rank counts (zeros without). */
  long[] words(PlannedCall c, boolean failed) {
    ReduceOp op = c.op();
    long[] w = new long[FIXED_WORDS + size];
    long[] head = {c.kind().ordinal(), c.dtype().ordinal(), op == null ? -1 : op.kind().ordinal(),
        op == null ? 0 : Double.doubleToLongBits(op.factor()), c.root(), c.count(),
        c.counts() == null ? 0 : c.counts().fingerprint(), failed ? 1 : 0};
    System.arraycopy(head, 0, w, 0, FIXED_WORDS);
    for (int q = 0; c.counts() != null && q < size; q++) w[FIXED_WORDS + q] = c.counts().count(q);
    return w;
  }

  /**
   * The agreement round (class comment): raises {@link CommMismatchException} on every rank when any
   * two ranks' calls differ, and, when a rank could not take its scratch, that rank's exception there
   * and {@link io.sparkcomms.collectives.CommException} on the others; the communicator stays usable.
   */
  private void agree(PlannedCall c, Calls calls, RuntimeException local) {
    long[] mine = words(c, local != null);
    int per = mine.length;
    long[] all = new long[per * size];
    calls.agree(mine, all);
    String bad = disagreement(all, size, rank, per);
    String name = c.kind().apiName();
    if (bad != null) throw new CommMismatchException(name + ": ranks disagree: " + bad);
    if (local != null) throw local;
    for (int q = 0; q < size; q++) {
      if (all[q * per + 7] != 0) {
        throw new io.sparkcomms.collectives.CommException(name + ": rank " + q
            + " could not take the call's scratch memory (its exception says why); no data moved");
      }
    }
  }

  /**
   * The first difference between rank {@code me}'s descriptor words and another rank's, as text, or
   * null when all agree. A peer's words are untrusted: codes outside their enums are shown as numbers.
   */
  static String disagreement(long[] all, int size, int me, int per) {
    for (int q = 0; q < size; q++) {
      for (int i = 0; i < per; i++) {
        if (i == 7) continue;  // the status word: a rank's own outcome, not its call
        if (all[q * per + i] != all[me * per + i]) {
          return "rank " + me + " called " + describe(all, me, per) + ", rank " + q + " called " + describe(all, q, per);
        }
      }
    }
    return null;
  }

  private static String describe(long[] all, int q, int per) {
    int b = q * per;
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
