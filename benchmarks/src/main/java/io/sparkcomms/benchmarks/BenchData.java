package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.ReduceOp;

/**
 * Inputs and checks of the benchmark. Element i of rank r's input is a pure function of
 * (seed, r, i), so every rank computes the float64 reference of its own output locally, without
 * exchanging data. Values are uniform in [-1, 1) (floats), in [0.5, 1.5) for PRODUCT, and small
 * integers for the integer types, always exactly representable in the dtype.
 */
final class BenchData {
  private BenchData() {}

  /**
   * One rank's buffers of one row and the reported size: {@code inCount} and {@code outCount} are
   * this rank's element counts (0 for the tensor a rooted call does not use on this rank, which the
   * caller passes as null), {@code totalCount} and {@code bytes} the row's size, {@code chunk} the
   * per-rank slice of the evenly split collectives, {@code counts} the per-rank counts of allgatherv
   * and reducescatterv (null otherwise).
   */
  record Layout(int inCount, int outCount, long totalCount, long bytes, int chunk, PerRankCounts counts) {
    /**
     * Rank {@code rank}'s layout of a message of about {@code size} bytes, nccl-tests style: size is
     * the largest buffer (allgather and gather: the output, reducescatter, scatter and alltoall: the
     * input; allgatherv and reducescatterv: the total of the counts), rounded down to whole elements
     * and, where the buffer is split evenly over the ranks, to a multiple of the rank count. Null
     * when empty.
     */
    static Layout of(Collective c, long size, DataType dt, int n, int rank, int root) {
      long total = size / dt.size();
      boolean isRoot = rank == root;
      if (c == Collective.ALL_GATHER_V || c == Collective.REDUCE_SCATTER_V) {
        if (total == 0) return null;
        PerRankCounts pc = PerRankCounts.of(perRankCounts(total, n), n);
        int mine = Math.toIntExact(pc.count(rank));
        int all = Math.toIntExact(total);
        return c == Collective.ALL_GATHER_V
            ? new Layout(mine, all, total, total * dt.size(), 0, pc)
            : new Layout(all, mine, total, total * dt.size(), 0, pc);
      }
      if (c == Collective.ALL_REDUCE || c == Collective.BROADCAST || c == Collective.REDUCE || c == Collective.BATCH) {
        if (total == 0) return null;
        int t = Math.toIntExact(total);
        int out = c == Collective.REDUCE && !isRoot ? 0 : t;
        return new Layout(t, out, total, total * dt.size(), t, null);
      }
      long chunk = total / n;
      if (chunk == 0) return null;
      int ch = Math.toIntExact(chunk), all = Math.toIntExact(chunk * n);
      long bytes = chunk * n * dt.size();
      switch (c) {
        case ALL_GATHER: return new Layout(ch, all, chunk * n, bytes, ch, null);
        case REDUCE_SCATTER: return new Layout(all, ch, chunk * n, bytes, ch, null);
        case ALL_TO_ALL: return new Layout(all, all, chunk * n, bytes, ch, null);
        case GATHER: return new Layout(ch, isRoot ? all : 0, chunk * n, bytes, ch, null);
        case SCATTER: return new Layout(isRoot ? all : 0, ch, chunk * n, bytes, ch, null);
        default: throw new IllegalArgumentException(c.apiName());
      }
    }
  }

  /**
   * The per-rank counts of allgatherv and reducescatterv for a total of {@code total} elements:
   * uneven but deterministic, rank r's share proportional to r+1. With S(k) = k(k+1)/2, rank r's
   * block is [floor(total*S(r)/S(n)), floor(total*S(r+1)/S(n))), so the blocks tile the total
   * exactly and a share under one element is 0 (the zero-count path is measured at small sizes).
   */
  static long[] perRankCounts(long total, int n) {
    long w = (long) n * (n + 1) / 2;
    long[] c = new long[n];
    long prev = 0;
    for (int r = 0; r < n; r++) {
      long s = (long) (r + 1) * (r + 2) / 2;
      // total <= 2^30 and w <= 2080 (64 ranks): the product fits a long
      long end = Math.multiplyExact(total, s) / w;
      c[r] = end - prev;
      prev = end;
    }
    return c;
  }

  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /** Uniform in [0, 1) from (seed, rank, i). */
  static double uniform(long seed, int rank, long i) {
    long h = mix(seed ^ mix(rank * 0xC2B2AE3D27D4EB4FL + i * 0x9E3779B97F4A7C15L + 0x632BE59BD9B4E019L));
    return (h >>> 11) * 0x1.0p-53;
  }

  /** Input element i of {@code rank}: exactly representable in {@code dt}. */
  static double value(long seed, int rank, long i, DataType dt, ReduceOp op) {
    double u = uniform(seed, rank, i);
    boolean prod = op != null && op.kind() == ReduceOp.Kind.PRODUCT;
    switch (dt) {
      case INT32: return prod ? (long) (u * 7) - 3 : (long) (u * 2001) - 1000;
      case INT64: return prod ? (long) (u * 7) - 3 : (long) ((u - 0.5) * 2e12);
      case FLOAT32: return (float) (prod ? 0.5 + u : 2 * u - 1);
      case BFLOAT16: return HalfFloats.bf16ToFloat(HalfFloats.floatToBf16((float) (prod ? 0.5 + u : 2 * u - 1)));
      case FLOAT16: return HalfFloats.fp16ToFloat(HalfFloats.floatToFp16((float) (prod ? 0.5 + u : 2 * u - 1)));
      default: return prod ? 0.5 + u : 2 * u - 1;
    }
  }

  /** Fills {@code t} with rank {@code rank}'s input. */
  static void fill(HostTensor t, long seed, int rank, ReduceOp op) {
    DataType dt = t.dtype();
    int n = Math.toIntExact(t.count());
    Object a = t.array();
    switch (dt) {
      case FLOAT32: { float[] x = (float[]) a; for (int i = 0; i < n; i++) x[i] = (float) value(seed, rank, i, dt, op); break; }
      case FLOAT64: { double[] x = (double[]) a; for (int i = 0; i < n; i++) x[i] = value(seed, rank, i, dt, op); break; }
      case INT32: { int[] x = (int[]) a; for (int i = 0; i < n; i++) x[i] = (int) value(seed, rank, i, dt, op); break; }
      case INT64: { long[] x = (long[]) a; for (int i = 0; i < n; i++) x[i] = (long) value(seed, rank, i, dt, op); break; }
      default: for (int i = 0; i < n; i++) t.setDouble(i, value(seed, rank, i, dt, op)); break;
    }
  }

  /** Fills {@code t} with a value no collective produces, so an element left unwritten fails the check. */
  static void poison(HostTensor t) {
    double p = t.dtype().isFloating() ? Double.NaN : -123456789;
    DataType dt = t.dtype();
    Object a = t.array();
    switch (dt) {
      case FLOAT32: java.util.Arrays.fill((float[]) a, Float.NaN); break;
      case FLOAT64: java.util.Arrays.fill((double[]) a, Double.NaN); break;
      case INT32: java.util.Arrays.fill((int[]) a, (int) p); break;
      case INT64: java.util.Arrays.fill((long[]) a, (long) p); break;
      default: for (long i = 0; i < t.count(); i++) t.setDouble(i, p);
    }
  }

  // ------------------------------------------------------------------ references and bounds

  /** Unit roundoff of the output type. */
  static double epsOut(DataType dt) {
    switch (dt) {
      case FLOAT32: return 0x1p-24;
      case BFLOAT16: return 0x1p-8;
      case FLOAT16: return 0x1p-11;
      default: return 0x1p-53;
    }
  }

  /** Half of the FP8 subnormal step relative to a block's max |x| (1 for our inputs): absolute slack. */
  static final double FP8_SUBNORMAL_SLACK = 0x1p-17;

  /** The result of checking one rank's output. */
  record Check(long wrong, double maxRelErr, String firstWrong) {}

  /** Reference of one reduced element: value, error bound, and the scale for the relative error. */
  private static final class Ref {
    double value;
    double bound;
    double scale;
  }

  private static void reduceRef(double[] xs, ReduceOp op, DataType dt, boolean lp, Ref out) {
    int n = xs.length;
    switch (op.kind()) {
      case MIN: {
        double acc = Double.POSITIVE_INFINITY;
        for (double x : xs) acc = Math.min(acc, x);
        out.value = acc; out.bound = 0; out.scale = Math.abs(acc);
        return;
      }
      case MAX: {
        double acc = Double.NEGATIVE_INFINITY;
        for (double x : xs) acc = Math.max(acc, x);
        out.value = acc; out.bound = 0; out.scale = Math.abs(acc);
        return;
      }
      case PRODUCT: {
        if (!dt.isFloating()) {
          long p = 1;
          for (double x : xs) p *= (long) x;
          out.value = dt == DataType.INT32 ? (int) p : p; out.bound = 0; out.scale = Math.abs(out.value);
          return;
        }
        double acc = 1;
        for (double x : xs) acc *= x;
        double accEps = dt == DataType.FLOAT64 ? 0x1p-53 : 0x1p-24;
        out.value = acc; out.bound = ((n + 1) * accEps + epsOut(dt)) * Math.abs(acc); out.scale = Math.abs(acc);
        return;
      }
      default: {
        if (!dt.isFloating()) {
          long s = 0;
          for (double x : xs) s += (long) x;
          if (op.kind() == ReduceOp.Kind.AVG) s /= n;
          out.value = dt == DataType.INT32 ? (int) s : s; out.bound = 0; out.scale = Math.abs(out.value);
          return;
        }
        double f = op.kind() == ReduceOp.Kind.PREMUL_SUM ? op.factor() : 1;
        double acc = 0, mag = 0;
        for (double x : xs) {
          acc += f * x;
          mag += Math.abs(f * x);
        }
        if (op.kind() == ReduceOp.Kind.AVG) {
          acc /= n;
          mag /= n;
        }
        double a = Math.abs(acc);
        out.value = acc;
        out.scale = Math.max(a, mag / n);
        if (lp) {
          // Two FP8 roundings (each input, then the reduced slice), each at most 2^-4 relative, FP32
          // accumulation, the output rounding, and the FP8 subnormal slack of both quantizations.
          out.bound = 0x1p-4 * mag * 1.01 + 0x1p-4 * (a + 0x1p-4 * mag) * 1.01
              + (n + 2) * 0x1p-24 * mag + epsOut(dt) * (a + 0.13 * mag) + (n + 2) * n * FP8_SUBNORMAL_SLACK;
        } else {
          double accEps = dt == DataType.FLOAT64 ? 0x1p-53 : 0x1p-24;
          out.bound = (n + 2) * accEps * mag + epsOut(dt) * a + (dt == DataType.FLOAT16 ? 0x1p-25 : 1e-300);
        }
      }
    }
  }

  /** Bound of a moved (not reduced) element: exact, or one FP8 rounding under LP. */
  private static double copyBound(double x, DataType dt, boolean lp) {
    if (!lp) return 0;
    double a = Math.abs(x);
    return 0x1p-4 * a * 1.01 + epsOut(dt) * a + 2 * FP8_SUBNORMAL_SLACK;
  }

  /**
   * Checks rank {@code rank}'s output of {@code c} (the {@code l.outCount()} elements this rank
   * receives; none on a non-root of reduce and gather) against the float64 reference of all ranks'
   * inputs; {@code root} is the root of the rooted collectives. {@code wrong} counts elements outside the bound; the relative error of an element is
   * |out - ref| / max(|ref|, mean over ranks of |contribution|) (the second term keeps sums that
   * cancel to near zero from dominating).
   */
  static Check check(Collective c, HostTensor out, Layout l, long seed, int rank, int n, DataType dt,
                     ReduceOp op, boolean lp, int root) {
    long wrong = 0;
    double maxRel = 0;
    String first = null;
    double[] xs = new double[n];
    Ref ref = new Ref();
    int chunk = l.chunk();
    int owner = 0;  // allgatherv: the rank whose block holds element j (non-decreasing in j)
    for (int j = 0; j < l.outCount(); j++) {
      double want, bound, scale;
      switch (c) {
        case ALL_REDUCE:
        case REDUCE:
        case REDUCE_SCATTER:
        case REDUCE_SCATTER_V: {
          long src = c == Collective.ALL_REDUCE || c == Collective.REDUCE ? j
              : c == Collective.REDUCE_SCATTER ? (long) rank * chunk + j : l.counts().start(rank) + j;
          for (int r = 0; r < n; r++) xs[r] = value(seed, r, src, dt, op);
          reduceRef(xs, op, dt, lp, ref);
          want = ref.value;
          bound = ref.bound;
          scale = ref.scale;
          break;
        }
        case ALL_GATHER:
        case GATHER: {
          int p = j / chunk;
          want = value(seed, p, j % chunk, dt, null);
          bound = copyBound(want, dt, lp);
          scale = Math.abs(want);
          break;
        }
        case ALL_GATHER_V: {
          PerRankCounts pc = l.counts();
          while (j >= pc.start(owner) + pc.count(owner)) owner++;  // the rank whose block holds j (blocks in rank order)
          want = value(seed, owner, j - pc.start(owner), dt, null);
          bound = 0;
          scale = Math.abs(want);
          break;
        }
        case SCATTER: {
          want = value(seed, root, (long) rank * chunk + j, dt, null);
          bound = 0;
          scale = Math.abs(want);
          break;
        }
        case ALL_TO_ALL: {
          int p = j / chunk;
          want = value(seed, p, (long) rank * chunk + j % chunk, dt, null);
          bound = copyBound(want, dt, lp);
          scale = Math.abs(want);
          break;
        }
        case BATCH: {  // sendrecv: from rank-1
          want = value(seed, (rank - 1 + n) % n, j, dt, null);
          bound = 0;
          scale = Math.abs(want);
          break;
        }
        case BROADCAST: {
          want = value(seed, root, j, dt, null);
          bound = 0;
          scale = Math.abs(want);
          break;
        }
        default:
          throw new IllegalArgumentException(c.apiName());
      }
      double got = out.getDouble(j);
      double diff = Math.abs(got - want);
      boolean ok = bound == 0 ? got == want : diff <= bound;
      if (!ok) {
        wrong++;
        if (first == null) first = "element " + j + ": got " + got + ", expected " + want + " +- " + bound;
      }
      double rel = diff == 0 ? 0 : Double.isNaN(diff) ? Double.POSITIVE_INFINITY : diff / Math.max(scale, Double.MIN_NORMAL);
      if (rel > maxRel) maxRel = rel;
    }
    return new Check(wrong, maxRel, first);
  }
}
