package io.sparkcomms.collectives;

import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.plan.CallPlanner;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import java.util.stream.IntStream;

/**
 * Runs collectives on one rank and checks this rank's output against a float64 reference. Every
 * rank's input is a pure function of (seed, call, rank, element), so each rank — thread or process —
 * can compute the reference of its own output without exchanging data. Outputs are poisoned first, so
 * an element the collective did not write fails.
 *
 * <p>Ranks that are threads of one JVM may share a {@link References}: the expected output of an
 * allReduce or allGather is the same on every rank, so it is computed once per call (in parallel)
 * instead of once per rank; each rank still compares every element of its own output with it.
 */
public final class CollectiveChecker {
  private final Communicator comm;
  private final long seed;
  private final References shared;
  private long callId;
  private final List<String> failures = new ArrayList<>();
  private int checkedCalls;

  public CollectiveChecker(Communicator comm, long seed) { this(comm, seed, null); }

  /** {@code shared}: the expected outputs shared with the other ranks of this JVM, or null. */
  public CollectiveChecker(Communicator comm, long seed, References shared) {
    this.comm = comm;
    this.seed = seed;
    this.shared = shared;
  }

  /**
   * Expected outputs (value and error bound per element) shared by the {@code ranks} ranks of one JVM
   * that check the same calls with the same seed: the first rank to ask computes one, the others wait
   * for it, and the entry is dropped once every rank has fetched it.
   */
  public static final class References {
    private final int ranks;
    private final ConcurrentHashMap<String, Entry> entries = new ConcurrentHashMap<>();

    public References(int ranks) { this.ranks = ranks; }

    private static final class Entry {
      final AtomicInteger fetched = new AtomicInteger();
      double[][] value;

      synchronized double[][] get(Supplier<double[][]> compute) {
        if (value == null) value = compute.get();
        return value;
      }
    }

    double[][] get(String key, Supplier<double[][]> compute) {
      Entry e = entries.computeIfAbsent(key, k -> new Entry());
      double[][] v = e.get(compute);
      if (e.fetched.incrementAndGet() == ranks) entries.remove(key);
      return v;
    }
  }

  /** {@code compute}, through the shared references when this checker has them. */
  private double[][] expected(String key, Supplier<double[][]> compute) {
    return shared == null ? compute.get() : shared.get(seed + "|" + key, compute);
  }

  public List<String> failures() { return failures; }
  public int checkedCalls() { return checkedCalls; }

  // ------------------------------------------------------------------ deterministic inputs

  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /** Uniform in [0,1) from (seed, call, rank, i). */
  static double u(long seed, long call, int rank, long i) {
    long h = mix(seed ^ mix(call * 0x9E3779B97F4A7C15L + rank * 0xC2B2AE3D27D4EB4FL + i));
    return (h >>> 11) * 0x1.0p-53;
  }

  /** Data shapes. */
  public enum Shape { UNIFORM, NORMAL, SPANNING }

  /** The exact value of input element i of {@code rank} (already representable in dtype). */
  static double input(long seed, long call, int rank, long i, DataType dt, ReduceOp op, Shape shape, long count) {
    double v;
    boolean prod = op != null && op.kind() == ReduceOp.Kind.PRODUCT;
    switch (dt) {
      case INT32:
        return prod ? (long) (u(seed, call, rank, i) * 7) - 3 : (long) (u(seed, call, rank, i) * 2001) - 1000;
      case INT64:
        return prod ? (long) (u(seed, call, rank, i) * 7) - 3 : (long) ((u(seed, call, rank, i) - 0.5) * 2e12);
      default:
        break;
    }
    if (prod) v = 0.5 + u(seed, call, rank, i);
    else if (shape == Shape.NORMAL) {
      double a = Math.max(u(seed, call, rank, i), 1e-300), b = u(seed, call, rank + 1000, i);
      v = Math.sqrt(-2 * Math.log(a)) * Math.cos(2 * Math.PI * b);
    } else if (shape == Shape.SPANNING) {
      // magnitude sweeps 1e-6..1e4 smoothly along the index (so a block shares a magnitude), random sign
      double mag = Math.pow(10, -6 + 10.0 * i / Math.max(1, count - 1)) * (0.5 + u(seed, call, rank, i));
      v = u(seed, call, rank + 2000, i) < 0.5 ? -mag : mag;
    } else v = 2 * u(seed, call, rank, i) - 1;
    return roundTo(dt, v);
  }

  static double roundTo(DataType dt, double v) {
    switch (dt) {
      case FLOAT32: return (float) v;
      case BFLOAT16: return HalfFloats.bf16ToFloat(HalfFloats.floatToBf16((float) v));
      case FLOAT16: return HalfFloats.fp16ToFloat(HalfFloats.floatToFp16((float) v));
      default: return v;
    }
  }

  static void fill(HostTensor t, long seed, long call, int rank, long base, long n, ReduceOp op, Shape shape, long count) {
    for (long i = 0; i < n; i++) t.setDouble(i, input(seed, call, rank, base + i, t.dtype(), op, shape, count));
  }

  static void poison(HostTensor t) {
    double p = t.dtype().isFloating() ? Double.NaN : -123456789;
    for (long i = 0; i < t.count(); i++) t.setDouble(i, p);
  }

  // ------------------------------------------------------------------ tolerance

  static double epsOut(DataType dt) {
    switch (dt) {
      case FLOAT32: return 0x1p-24;
      case BFLOAT16: return 0x1p-8;
      case FLOAT16: return 0x1p-11;
      default: return 0x1p-53;
    }
  }

  static double tiny(DataType dt) {
    return dt == DataType.FLOAT16 ? 0x1p-25 : 1e-300;
  }

  /**
   * An upper bound of max|x| over the quantization block holding element i (any rank): the FP8
   * subnormal step scales with it, so values far below their block's maximum get an absolute error
   * up to about amax * 2^-17 (half a subnormal step, 2^-10 or 2^-11, times the scale, at most
   * 2 * amax / 240).
   */
  static double blockAmax(Shape shape, long i, long count, int blockSize) {
    switch (shape) {
      case NORMAL: return 6.5;
      case SPANNING: return 1.5 * Math.pow(10, -6 + 10.0 * Math.min(count - 1, i + blockSize) / Math.max(1, count - 1));
      default: return 1.0;
    }
  }

  static final double SUBNORMAL_SLACK = 0x1p-17;

  /** Reference reduction of the values {@code xs} (rank order) and the error bound of the result. */
  static double[] reduceRef(double[] xs, ReduceOp op, DataType dt, boolean lp) { return reduceRef(xs, op, dt, lp, 0); }

  static double[] reduceRef(double[] xs, ReduceOp op, DataType dt, boolean lp, double amax) {
    return reduceRef(xs, op, dt, lp ? Protocol.LP : Protocol.FLAT, amax);
  }

  /**
   * Reference reduction and its error bound for the arithmetic of protocol {@code algo}: ours accumulates in
   * FP32 and rounds once to the output dtype (LP adds two FP8 roundings); the vendor library (NCCL)
   * computes fp16 and bf16 in the dtype itself, so PREMUL_SUM / AVG round each premultiplied input and
   * every partial sum or product rounds too: up to 2n roundings, each at most half an ulp (relative
   * 2^-11 for fp16, 2^-8 for bf16, or half a subnormal step near zero).
   */
  static double[] reduceRef(double[] xs, ReduceOp op, DataType dt, Protocol algo, double amax) {
    double[] rb = reduceRefFp32(xs, op, dt, algo == Protocol.LP, amax);
    if (algo == Protocol.VENDOR && (dt == DataType.FLOAT16 || dt == DataType.BFLOAT16) && rb[1] > 0) {
      double mag = 0;
      for (double x : xs) mag += Math.abs(op.kind() == ReduceOp.Kind.PREMUL_SUM ? op.factor() * x : x);
      if (op.kind() == ReduceOp.Kind.PRODUCT) mag = Math.abs(rb[0]);
      int n = xs.length;
      rb[1] = Math.max(rb[1], 2 * n * (epsOut(dt) * mag * 1.01 + tiny(dt)));
    }
    return rb;
  }

  private static double[] reduceRefFp32(double[] xs, ReduceOp op, DataType dt, boolean lp, double amax) {
    int n = xs.length;
    double acc, mag = 0;
    switch (op.kind()) {
      case MIN: acc = Double.POSITIVE_INFINITY; for (double x : xs) acc = Math.min(acc, x); return new double[] {acc, 0};
      case MAX: acc = Double.NEGATIVE_INFINITY; for (double x : xs) acc = Math.max(acc, x); return new double[] {acc, 0};
      case PRODUCT: {
        if (!dt.isFloating()) {
          long p = 1;
          for (double x : xs) p *= (long) x;
          return new double[] {dt == DataType.INT32 ? (int) p : p, 0};
        }
        acc = 1;
        for (double x : xs) acc *= x;
        double accEps = dt == DataType.FLOAT64 ? 0x1p-53 : 0x1p-24;
        return new double[] {acc, ((n + 1) * accEps + epsOut(dt)) * Math.abs(acc) + tiny(dt)};
      }
      default: {
        if (!dt.isFloating()) {
          long s = 0;
          for (double x : xs) s += (long) x;
          if (op.kind() == ReduceOp.Kind.AVG) s /= n;
          return new double[] {dt == DataType.INT32 ? (int) s : s, 0};
        }
        double f = op.kind() == ReduceOp.Kind.PREMUL_SUM ? op.factor() : 1;
        acc = 0;
        for (double x : xs) {
          acc += f * x;
          mag += Math.abs(f * x);
        }
        if (op.kind() == ReduceOp.Kind.AVG) {
          acc /= n;
          mag /= n;
        }
        if (lp) {
          // two FP8 roundings (inputs, then the reduced value): each at most 2^-4 relative
          return new double[] {acc, 0x1p-4 * mag * 1.01 + 0x1p-4 * (Math.abs(acc) + 0x1p-4 * mag) * 1.01
              + epsOut(dt) * (Math.abs(acc) + 0.13 * mag) + (n + 1.5) * SUBNORMAL_SLACK * amax};
        }
        double accEps = dt == DataType.FLOAT64 ? 0x1p-53 : 0x1p-24;
        return new double[] {acc, (n + 2) * accEps * mag + epsOut(dt) * Math.abs(acc) + tiny(dt)};
      }
    }
  }

  /** Element indices: in parallel where the reference is shared (one rank computes it for all). */
  private IntStream range(int count) {
    IntStream s = IntStream.range(0, count);
    return shared != null && count >= 4096 ? s.parallel() : s;
  }

  private void check(String what, HostTensor out, long i, double ref, double bound) {
    double got = out.getDouble(i);
    boolean ok = bound == 0 ? Double.compare(got, ref) == 0 || got == ref : Math.abs(got - ref) <= bound;
    if (!ok && failures.size() < 20) {
      failures.add(what + " rank " + comm.rank() + " element " + i + ": got " + got + ", expected " + ref + " ± " + bound);
    }
  }

  // ------------------------------------------------------------------ one checked call per collective

  private long[] callsByProtocol() {
    Protocol[] all = Protocol.values();
    long[] c = new long[all.length];
    for (int i = 0; i < all.length; i++) c[i] = comm.stats().calls(all[i]);
    return c;
  }

  /** The protocol the communicator ran since {@code before} (from its statistics: exactly one call). */
  private Protocol usedSince(long[] before) {
    Protocol used = null;
    long calls = 0;
    for (Protocol p : Protocol.values()) {
      long d = comm.stats().calls(p) - before[p.ordinal()];
      calls += d;
      if (d > 0) used = p;
    }
    if (calls != 1) throw new AssertionError("expected one recorded call, got " + calls + ": " + comm.stats());
    return used;
  }

  /** allReduce (out-of-place unless {@code inPlace}); returns the protocol that ran. */
  public Protocol allReduce(DataType dt, ReduceOp op, int count, boolean inPlace, Shape shape) {
    long call = callId++;
    int n = comm.size();
    HostTensor in = HostTensor.allocate(dt, count);
    fill(in, seed, call, comm.rank(), 0, count, op, shape, count);
    HostTensor out = inPlace ? in : HostTensor.allocate(dt, count);
    if (!inPlace) poison(out);
    long[] before = callsByProtocol();
    comm.allReduce(in, out, op);
    Protocol algo = usedSince(before);
    String what = "allReduce(" + dt + ", " + op + ", count=" + count + ", " + algo + (inPlace ? ", in-place" : "") + ", " + shape + ")";
    int bs = bs();
    double[][] ref = expected("allReduce " + call + " " + dt + " " + op + " " + count + " " + algo + " " + shape + " " + n, () -> {
      double[][] e = new double[2][count];
      range(count).forEach(i -> {
        double[] xs = new double[n];
        for (int r = 0; r < n; r++) xs[r] = input(seed, call, r, i, dt, op, shape, count);
        double[] rb = reduceRef(xs, op, dt, algo, n * blockAmax(shape, i, count, bs));
        e[0][i] = rb[0];
        e[1][i] = rb[1];
      });
      return e;
    });
    for (int i = 0; i < count; i++) check(what, out, i, ref[0][i], ref[1][i]);
    checkedCalls++;
    return algo;
  }

  public Protocol reduceScatter(DataType dt, ReduceOp op, int count, Shape shape) {
    long call = callId++;
    int n = comm.size();
    HostTensor in = HostTensor.allocate(dt, count * n);
    fill(in, seed, call, comm.rank(), 0, (long) count * n, op, shape, (long) count * n);
    HostTensor out = HostTensor.allocate(dt, count);
    poison(out);
    long[] before = callsByProtocol();
    comm.reduceScatter(in, out, op);
    Protocol algo = usedSince(before);
    String what = "reduceScatter(" + dt + ", " + op + ", count=" + count + ", " + algo + ")";
    double[] xs = new double[n];
    for (int i = 0; i < count; i++) {
      long gi = (long) comm.rank() * count + i;
      for (int r = 0; r < n; r++) xs[r] = input(seed, call, r, gi, dt, op, shape, (long) count * n);
      double[] rb = reduceRef(xs, op, dt, algo, blockAmax(shape, gi, (long) count * n, bs()));
      check(what, out, i, rb[0], rb[1]);
    }
    checkedCalls++;
    return algo;
  }

  /** Data-movement bound: exact, or one FP8 rounding (plus the output dtype's rounding). */
  private static double moveBound(double x, DataType dt, boolean lp, double amax) {
    return lp ? 0x1p-4 * Math.abs(x) * 1.01 + epsOut(dt) * Math.abs(x) * 1.07 + SUBNORMAL_SLACK * amax : 0;
  }

  public Protocol allGather(DataType dt, int count, Shape shape) {
    long call = callId++;
    int n = comm.size();
    HostTensor in = HostTensor.allocate(dt, count);
    fill(in, seed, call, comm.rank(), 0, count, null, shape, count);
    HostTensor out = HostTensor.allocate(dt, count * n);
    poison(out);
    long[] before = callsByProtocol();
    comm.allGather(in, out);
    Protocol algo = usedSince(before);
    boolean lp = algo == Protocol.LP;
    String what = "allGather(" + dt + ", count=" + count + ", " + algo + ")";
    int bs = bs();
    double[][] ref = expected("allGather " + call + " " + dt + " " + count + " " + algo + " " + shape + " " + n, () -> {
      double[][] e = new double[2][n * count];
      range(n * count).forEach(k -> {
        int p = k / count, i = k % count;
        double x = input(seed, call, p, i, dt, null, shape, count);
        e[0][k] = x;
        e[1][k] = moveBound(x, dt, lp, blockAmax(shape, i, count, bs));
      });
      return e;
    });
    for (int k = 0; k < n * count; k++) check(what, out, k, ref[0][k], ref[1][k]);
    checkedCalls++;
    return algo;
  }

  /**
   * The FP8 block size of the communicator's LP calls: the one in effect in the native communicator
   * on the GPU backend, else the option or the host default.
   */
  private int bs() {
    if (blockSize == 0) {
      blockSize = comm instanceof io.sparkcomms.collectives.gpu.GpuCommunicator g ? (int) g.option("lp_block_size")
          : comm instanceof io.sparkcomms.collectives.hier.GpuHierarchicalCommunicator h ? (int) h.option("lp_block_size")
          : Thresholds.lpBlockSize(comm.options());
    }
    return blockSize;
  }

  private int blockSize;

  public Protocol allToAll(DataType dt, int count, Shape shape) {
    long call = callId++;
    int n = comm.size();
    HostTensor in = HostTensor.allocate(dt, count * n);
    fill(in, seed, call, comm.rank(), 0, (long) count * n, null, shape, (long) count * n);
    HostTensor out = HostTensor.allocate(dt, count * n);
    poison(out);
    long[] before = callsByProtocol();
    comm.allToAll(in, out);
    Protocol algo = usedSince(before);
    boolean lp = algo == Protocol.LP;
    String what = "allToAll(" + dt + ", count=" + count + ", " + algo + ")";
    for (int p = 0; p < n; p++) {
      for (int i = 0; i < count; i++) {
        double x = input(seed, call, p, (long) comm.rank() * count + i, dt, null, shape, (long) count * n);
        check(what, out, (long) p * count + i, x, moveBound(x, dt, lp, blockAmax(shape, (long) comm.rank() * count + i, (long) count * n, bs())));
      }
    }
    checkedCalls++;
    return algo;
  }

  public void broadcast(DataType dt, int count, int root, boolean inPlace) {
    long call = callId++;
    HostTensor in = HostTensor.allocate(dt, count);
    fill(in, seed, call, comm.rank(), 0, count, null, Shape.UNIFORM, count);
    HostTensor out = inPlace ? in : HostTensor.allocate(dt, count);
    if (!inPlace) poison(out);
    comm.broadcast(in, out, root);
    String what = "broadcast(" + dt + ", count=" + count + ", root=" + root + (inPlace ? ", in-place" : "") + ")";
    for (int i = 0; i < count; i++) check(what, out, i, input(seed, call, root, i, dt, null, Shape.UNIFORM, count), 0);
    checkedCalls++;
  }

  // ------------------------------------------------------------------ rooted and per-rank-count collectives

  /** Poisoned elements after every output that the call must leave as they are. */
  public static final int GUARD = 3;

  private static boolean poisoned(HostTensor t, long i) {
    double v = t.getDouble(i);
    return t.dtype().isFloating() ? Double.isNaN(v) : v == -123456789;
  }

  /** Elements [from, count) of {@code t} are still poisoned (guards, or an output the call must not write). */
  private void checkUntouched(String what, HostTensor t, long from) {
    for (long i = from; i < t.count(); i++) {
      if (!poisoned(t, i)) {
        if (failures.size() < 20) failures.add(what + " rank " + comm.rank() + " wrote element " + i + " it must leave alone: " + t.getDouble(i));
        return;
      }
    }
  }

  /** {@code t} still holds the inputs it was filled with (a tensor the call only reads, or ignores). */
  private void checkInputKept(String what, HostTensor t, long call, int rank, ReduceOp op, Shape shape, long count) {
    for (long i = 0; i < t.count(); i++) {
      if (Double.compare(t.getDouble(i), input(seed, call, rank, i, t.dtype(), op, shape, count)) != 0) {
        if (failures.size() < 20) failures.add(what + " rank " + comm.rank() + " changed its input at element " + i);
        return;
      }
    }
  }

  /** A poisoned tensor of {@code count} elements plus {@link #GUARD}. */
  private static HostTensor poisonedOutput(DataType dt, long count) {
    HostTensor t = HostTensor.allocate(dt, Math.toIntExact(count + GUARD));
    poison(t);
    return t;
  }

  /**
   * reduce to {@code root}: the root's output checked against the float64 reference; a non-root
   * passes null (odd calls) or a poisoned output that must stay untouched, and its input must be kept.
   */
  public Protocol reduce(DataType dt, ReduceOp op, int count, int root, boolean inPlace) {
    long call = callId++;
    int n = comm.size(), me = comm.rank();
    boolean isRoot = me == root;
    HostTensor in = HostTensor.allocate(dt, count);
    fill(in, seed, call, me, 0, count, op, Shape.UNIFORM, count);
    HostTensor out = inPlace ? in : !isRoot && call % 2 == 1 ? null : poisonedOutput(dt, count);
    long[] before = callsByProtocol();
    comm.reduce(in, out, op, root);
    Protocol algo = usedSince(before);
    String what = "reduce(" + dt + ", " + op + ", count=" + count + ", root=" + root + ", " + algo + (inPlace ? ", in-place" : "") + ")";
    if (algo == Protocol.LP && failures.size() < 20) failures.add(what + ": ran in low precision; reduce is full precision");
    if (isRoot) {
      double[] xs = new double[n];
      for (int i = 0; i < count; i++) {
        for (int r = 0; r < n; r++) xs[r] = input(seed, call, r, i, dt, op, Shape.UNIFORM, count);
        double[] rb = reduceRef(xs, op, dt, algo, n * blockAmax(Shape.UNIFORM, i, count, bs()));
        check(what, out, i, rb[0], rb[1]);
      }
      if (!inPlace) checkUntouched(what, out, count);
    } else {
      if (out != null && out != in) checkUntouched(what, out, 0);
      checkInputKept(what, in, call, me, op, Shape.UNIFORM, count);
    }
    checkedCalls++;
    return algo;
  }

  /** gather to {@code root}: rank p's input at element p*count of the root's output; non-roots as for {@link #reduce}. */
  public Protocol gather(DataType dt, int count, int root) {
    long call = callId++;
    int n = comm.size(), me = comm.rank();
    boolean isRoot = me == root;
    HostTensor in = HostTensor.allocate(dt, count);
    fill(in, seed, call, me, 0, count, null, Shape.UNIFORM, count);
    HostTensor out = !isRoot && call % 2 == 1 ? null : poisonedOutput(dt, (long) n * count);
    long[] before = callsByProtocol();
    comm.gather(in, out, root);
    Protocol algo = usedSince(before);
    boolean lp = algo == Protocol.LP;
    String what = "gather(" + dt + ", count=" + count + ", root=" + root + ", " + algo + ")";
    if (lp && failures.size() < 20) failures.add(what + ": ran in low precision; gather moves data exactly");
    if (isRoot) {
      for (int p = 0; p < n; p++) {
        for (int i = 0; i < count; i++) {
          double x = input(seed, call, p, i, dt, null, Shape.UNIFORM, count);
          check(what, out, (long) p * count + i, x, moveBound(x, dt, lp, blockAmax(Shape.UNIFORM, i, count, bs())));
        }
      }
      checkUntouched(what, out, (long) n * count);
    } else if (out != null) {
      checkUntouched(what, out, 0);
    }
    checkInputKept(what, in, call, me, null, Shape.UNIFORM, count);
    checkedCalls++;
    return algo;
  }

  /** scatter from {@code root}: slice r of the root's input into rank r's output; a non-root's input (or null) is ignored. */
  public Protocol scatter(DataType dt, int count, int root) {
    long call = callId++;
    int n = comm.size(), me = comm.rank();
    long all = (long) n * count;
    HostTensor in = me != root && call % 2 == 1 ? null : HostTensor.allocate(dt, Math.toIntExact(all));
    if (in != null) fill(in, seed, call, me, 0, all, null, Shape.UNIFORM, all);
    // the output's count is the call's count: its guard lies past its end, in the same direct buffer
    java.nio.ByteBuffer mem = java.nio.ByteBuffer.allocateDirect((count + GUARD) * dt.size()).order(java.nio.ByteOrder.nativeOrder());
    HostTensor whole = HostTensor.wrap(mem, dt);
    poison(whole);
    HostTensor out = HostTensor.wrap(mem.duplicate().limit(count * dt.size()), dt);
    long[] before = callsByProtocol();
    comm.scatter(in, out, root);
    Protocol algo = usedSince(before);
    boolean lp = algo == Protocol.LP;
    String what = "scatter(" + dt + ", count=" + count + ", root=" + root + ", " + algo + ")";
    if (lp && failures.size() < 20) failures.add(what + ": ran in low precision; scatter moves data exactly");
    for (int i = 0; i < count; i++) {
      long k = (long) me * count + i;
      double x = input(seed, call, root, k, dt, null, Shape.UNIFORM, all);
      check(what, out, i, x, moveBound(x, dt, lp, blockAmax(Shape.UNIFORM, k, all, bs())));
    }
    checkUntouched(what, whole, count);
    if (in != null) checkInputKept(what, in, call, me, null, Shape.UNIFORM, all);
    checkedCalls++;
    return algo;
  }

  /** Per-rank counts in 0..count for call {@code call}, the same on every rank; with a 0 at rank 1 when there is one. */
  static long[] perRankCounts(long seed, long call, int ranks, int count) {
    long[] c = new long[ranks];
    for (int p = 0; p < ranks; p++) c[p] = p == 1 ? 0 : (long) (u(seed, call, p, -7) * (count + 1));
    if (ranks > 0 && count > 0) c[0] = count;  // the largest block sets the chunking: make it the given count
    return c;
  }

  /** allGatherV with {@link #perRankCounts}: every rank's output checked in full, guards too. */
  public Protocol allGatherV(DataType dt, int count) {
    long call = callId++;
    int n = comm.size(), me = comm.rank();
    long[] counts = perRankCounts(seed, call, n, count);
    long[] start = new long[n];
    long total = 0;
    for (int p = 0; p < n; p++) {
      start[p] = total;
      total += counts[p];
    }
    HostTensor in = HostTensor.allocate(dt, Math.toIntExact(counts[me]));
    fill(in, seed, call, me, 0, counts[me], null, Shape.UNIFORM, counts[me]);
    HostTensor out = poisonedOutput(dt, total);
    long[] before = callsByProtocol();
    comm.allGatherV(in, out, counts);
    Protocol algo = usedSince(before);
    boolean lp = algo == Protocol.LP;
    String what = "allGatherV(" + dt + ", counts=" + java.util.Arrays.toString(counts) + ", " + algo + ")";
    if (lp && failures.size() < 20) failures.add(what + ": ran in low precision; allGatherV moves data exactly");
    for (int p = 0; p < n; p++) {
      for (long i = 0; i < counts[p]; i++) {
        double x = input(seed, call, p, i, dt, null, Shape.UNIFORM, counts[p]);
        check(what, out, start[p] + i, x, moveBound(x, dt, lp, blockAmax(Shape.UNIFORM, i, counts[p], bs())));
      }
    }
    checkUntouched(what, out, total);
    checkedCalls++;
    return algo;
  }

  /** reduceScatterV with {@link #perRankCounts}: this rank's block of the reduction against the float64 reference. */
  public Protocol reduceScatterV(DataType dt, ReduceOp op, int count) {
    long call = callId++;
    int n = comm.size(), me = comm.rank();
    long[] counts = perRankCounts(seed, call, n, count);
    long total = 0, mine = 0;
    for (int p = 0; p < n; p++) {
      if (p == me) mine = total;
      total += counts[p];
    }
    HostTensor in = HostTensor.allocate(dt, Math.toIntExact(total));
    fill(in, seed, call, me, 0, total, op, Shape.UNIFORM, total);
    HostTensor out = poisonedOutput(dt, counts[me]);
    long[] before = callsByProtocol();
    comm.reduceScatterV(in, out, counts, op);
    Protocol algo = usedSince(before);
    String what = "reduceScatterV(" + dt + ", " + op + ", counts=" + java.util.Arrays.toString(counts) + ", " + algo + ")";
    if (algo == Protocol.LP && failures.size() < 20) failures.add(what + ": ran in low precision; reduceScatterV is full precision");
    double[] xs = new double[n];
    for (long i = 0; i < counts[me]; i++) {
      long gi = mine + i;
      for (int r = 0; r < n; r++) xs[r] = input(seed, call, r, gi, dt, op, Shape.UNIFORM, total);
      double[] rb = reduceRef(xs, op, dt, algo, n * blockAmax(Shape.UNIFORM, gi, total, bs()));
      check(what, out, i, rb[0], rb[1]);
    }
    checkUntouched(what, out, counts[me]);
    checkInputKept(what, in, call, me, op, Shape.UNIFORM, total);
    checkedCalls++;
    return algo;
  }

  /**
   * The rooted and per-rank-count collectives on this rank: every dtype, every op (reduce,
   * reduceScatterV), roots 0, the last rank and one between, in and out of place (reduce), for each
   * count. {@code vCounts} scale allGatherV's and reduceScatterV's blocks (each 0..count).
   */
  public void runRootedAndV(int[] counts, int[] vCounts, Set<Collective> which) {
    int n = comm.size();
    for (int ci = 0; ci < counts.length; ci++) {
      int count = counts[ci];
      for (DataType dt : DataType.values()) {
        int root = (count + dt.ordinal()) % n;
        for (ReduceOp op : ReduceOp.examples()) {
          if (!op.supports(dt)) continue;
          if (which.contains(Collective.REDUCE)) reduce(dt, op, count, root, false);
          if (which.contains(Collective.REDUCE_SCATTER_V) && ci < vCounts.length) reduceScatterV(dt, op, vCounts[ci]);
        }
        if (which.contains(Collective.REDUCE)) reduce(dt, ReduceOp.SUM, count, n - 1 - root, true);
        if (which.contains(Collective.GATHER)) gather(dt, count, n - 1 - root);
        if (which.contains(Collective.SCATTER)) scatter(dt, count, root);
        if (which.contains(Collective.ALL_GATHER_V) && ci < vCounts.length) allGatherV(dt, vCounts[ci]);
      }
    }
  }

  // ------------------------------------------------------------------ point-to-point

  /** A receive buffer: {@code view} (count elements) between {@link #GUARD} elements each side, all poisoned. */
  private record Guarded(HostTensor whole, HostTensor view) {}

  private static Guarded guarded(DataType dt, int count) {
    ByteBuffer b = ByteBuffer.allocateDirect((count + 2 * GUARD) * dt.size());
    HostTensor whole = HostTensor.wrap(b, dt);
    poison(whole);
    b.position(GUARD * dt.size()).limit((GUARD + count) * dt.size());
    return new Guarded(whole, HostTensor.wrap(b, dt));
  }

  /** {@code g.view} holds rank {@code from}'s elements {@code base..base+count} of call {@code call}, its guards untouched. */
  private void checkReceived(String what, Guarded g, long call, int from, long base, int count) {
    for (int i = 0; i < count; i++) check(what, g.view(), i, input(seed, call, from, base + i, g.view().dtype(), null, Shape.UNIFORM, count), 0);
    for (int i = 0; i < GUARD; i++) {
      long hi = GUARD + count + i;
      if ((!poisoned(g.whole(), i) || !poisoned(g.whole(), hi)) && failures.size() < 20) {
        failures.add(what + " rank " + comm.rank() + " wrote a guard element next to its receive buffer");
        return;
      }
    }
  }

  private HostTensor filled(DataType dt, long call, long base, int count) {
    HostTensor t = HostTensor.allocate(dt, count);
    fill(t, seed, call, comm.rank(), base, count, null, Shape.UNIFORM, count);
    return t;
  }

  /** A batch: each rank sends to rank+shift and receives from rank-shift (with two ranks, both ways with one peer). */
  public void ring(DataType dt, int count, int shift) {
    long call = callId++;
    int n = comm.size(), me = comm.rank(), right = (me + shift) % n, left = (me - shift % n + n) % n;
    HostTensor in = filled(dt, call, 0, count);
    Guarded got = guarded(dt, count);
    comm.batch().send(in, right).recv(got.view(), left).issue().waitFor();
    String what = "batch ring(" + dt + ", count=" + count + ", shift=" + shift + ")";
    checkReceived(what, got, call, left, 0, count);
    checkInputKept(what, in, call, me, null, Shape.UNIFORM, count);
    checkedCalls++;
  }

  /** Blocking (or async, odd calls) send and recv between ranks 2k and 2k+1; the lower sends first. */
  public void pairs(DataType dt, int count) {
    long call = callId++;
    int n = comm.size(), me = comm.rank(), partner = me ^ 1;
    if (partner >= n) return;
    HostTensor in = filled(dt, call, 0, count);
    Guarded got = guarded(dt, count);
    boolean async = call % 2 == 1, lower = me < partner;
    if (async) {
      Work a = lower ? comm.sendAsync(in, partner) : comm.recvAsync(got.view(), partner);
      Work b = lower ? comm.recvAsync(got.view(), partner) : comm.sendAsync(in, partner);
      b.waitFor();
      if (!a.isCompleted() && failures.size() < 20) failures.add("an earlier async transfer completed after a later one");
      a.waitFor();
    } else if (lower) {
      comm.send(in, partner);
      comm.recv(got.view(), partner);
    } else {
      comm.recv(got.view(), partner);
      comm.send(in, partner);
    }
    String what = (async ? "async " : "") + "send/recv(" + dt + ", count=" + count + ") with rank " + partner;
    checkReceived(what, got, call, partner, 0, count);
    checkInputKept(what, in, call, me, null, Shape.UNIFORM, count);
    checkedCalls++;
  }

  /** One batch with every peer both ways, plus a second send to the right neighbour (matched in order). */
  public void allPeers(DataType dt, int count) {
    long call = callId++;
    int n = comm.size(), me = comm.rank(), right = (me + 1) % n, left = (me - 1 + n) % n;
    BatchSendRecv batch = comm.batch();
    Guarded[] got = new Guarded[n];
    for (int q = 0; q < n; q++) if (q != me) batch.send(filled(dt, call, (long) q * count, count), q);
    batch.send(filled(dt, call, (long) (n + right) * count, count), right);
    for (int q = 0; q < n; q++) if (q != me) batch.recv((got[q] = guarded(dt, count)).view(), q);
    Guarded second = guarded(dt, count);
    batch.recv(second.view(), left);
    batch.issue().waitFor();
    String what = "batch with every peer(" + dt + ", count=" + count + ")";
    for (int q = 0; q < n; q++) if (q != me) checkReceived(what + " from rank " + q, got[q], call, q, (long) me * count, count);
    checkReceived(what + " second transfer from rank " + left, second, call, left, (long) (n + me) * count, count);
    checkedCalls++;
  }

  /**
   * The point-to-point checks on this rank, every dtype and count: batch rings (shift 1 and, from
   * three ranks, size-1), blocking and async pairs, and (counts up to 1023) a batch with every peer.
   * With one rank, a transfer to itself must be refused.
   */
  public void runPointToPoint(int[] counts) {
    int n = comm.size();
    if (n == 1) {
      try {
        comm.send(HostTensor.allocate(DataType.FLOAT32, 1), 0);
        if (failures.size() < 20) failures.add("a send to this rank itself was accepted");
      } catch (IllegalArgumentException expected) {
        // refused before anything runs
      }
      return;
    }
    for (int count : counts) {
      for (DataType dt : DataType.values()) {
        ring(dt, count, 1);
        if (n > 2) ring(dt, count, n - 1);
        pairs(dt, count);
        if (count <= 1023) allPeers(dt, count);
      }
    }
  }

  /**
   * The full matrix on this rank: every collective x op x dtype x algorithm (FLAT, TREE, LP where
   * eligible) for each count. {@code optionsByAlgo} gives a communicator per forced algorithm.
   */
  public static List<String> runMatrix(java.util.function.Function<Algorithm, Communicator> commFor, long seed, int[] counts) {
    return runMatrix(commFor, seed, counts, new Algorithm[] {Algorithm.FLAT, Algorithm.TREE, Algorithm.LP});
  }

  public static List<String> runMatrix(java.util.function.Function<Algorithm, Communicator> commFor, long seed, int[] counts, Algorithm[] algorithms) {
    return runMatrix(commFor, seed, counts, algorithms, EnumSet.allOf(Collective.class), null);
  }

  /**
   * The matrix restricted to the collectives in {@code which} (allReduce in-place with ALL_REDUCE),
   * with expected outputs shared through {@code shared} (null: none) by the ranks of this JVM.
   */
  public static List<String> runMatrix(java.util.function.Function<Algorithm, Communicator> commFor, long seed, int[] counts,
      Algorithm[] algorithms, Set<Collective> which, References shared) {
    boolean ar = which.contains(Collective.ALL_REDUCE), rs = which.contains(Collective.REDUCE_SCATTER);
    boolean ag = which.contains(Collective.ALL_GATHER), a2a = which.contains(Collective.ALL_TO_ALL);
    boolean bc = which.contains(Collective.BROADCAST);
    List<String> fails = new ArrayList<>();
    for (Algorithm a : algorithms) {
      CollectiveChecker ck = new CollectiveChecker(commFor.apply(a), seed + a.ordinal() * 1_000_003L, shared);
      for (int count : counts) {
        for (DataType dt : DataType.values()) {
          for (ReduceOp op : ReduceOp.examples()) {
            if (!op.supports(dt)) continue;
            if (a == Algorithm.LP && !CallPlanner.lowPrecisionEligible(Collective.ALL_REDUCE, dt, op)) continue;
            if (ar) ck.allReduce(dt, op, count, false, Shape.UNIFORM);
            if (rs && a != Algorithm.TREE) ck.reduceScatter(dt, op, count, Shape.UNIFORM);
          }
          if (a != Algorithm.TREE && (a != Algorithm.LP || CallPlanner.lowPrecisionEligible(Collective.ALL_GATHER, dt, null))
) {
            if (ag) ck.allGather(dt, count, Shape.UNIFORM);
            if (a2a) ck.allToAll(dt, count, Shape.UNIFORM);
          }
          if (a == Algorithm.FLAT || a == Algorithm.VENDOR) {
            if (bc) ck.broadcast(dt, count, count % ck.comm.size(), false);
            if (ar) ck.allReduce(dt, ReduceOp.SUM, count, true, Shape.UNIFORM);
            if (bc) ck.broadcast(dt, count, ck.comm.size() - 1, true);
          }
        }
      }
      if (a == Algorithm.FLAT || a == Algorithm.VENDOR) ck.runRootedAndV(counts, counts, which);
      if (a == Algorithm.FLAT && which.contains(Collective.SEND)) ck.runPointToPoint(counts);
      fails.addAll(ck.failures());
      if (fails.size() > 20) break;
    }
    return fails;
  }
}
