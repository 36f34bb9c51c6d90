package io.sparkcomms.collectives;

import io.sparkcomms.collectives.plan.AllToAllVPlan;
import java.util.Arrays;
import java.util.Random;

/**
 * Reference semantics of {@link Communicator#allToAllV}, independent of any backend, for the host and
 * GPU tests. Indices: {@code sendCounts[i][j]} is what rank i sends to rank j; {@code sendOffsets[i]}
 * and {@code recvOffsets[j]} are rank i's / rank j's offset tensors (both null for the packed layout).
 *
 * <p>Which violation is reported first, and its text, is {@link AllToAllVPlan}'s verdict (receivers in
 * order, each receiver's slots, then each sender's block: negative, outside the sender's input, too
 * large for the receiver's room); both backends raise it as "allToAllV[ #call] (no output written,
 * recvCounts were): " + the text. Where each element lands is computed here independently.
 */
public final class AllToAllVReference {
  private AllToAllVReference() {}

  /** Where an output element comes from: {@link #srcRank} -1 means "not written, keeps its poison". */
  public static final class RankResult {
    /** recvCounts[i]: what rank i sends to this rank (written even when the call fails). */
    public final long[] recvCounts;
    /** Per output element: the rank whose input it holds, or -1. Null when the call fails (nothing written). */
    public final int[] srcRank;
    /** Per output element: the index in that rank's input, or -1. Null when the call fails. */
    public final long[] srcIndex;

    RankResult(long[] recvCounts, int[] srcRank, long[] srcIndex) {
      this.recvCounts = recvCounts;
      this.srcRank = srcRank;
      this.srcIndex = srcIndex;
    }

    /** Whether output element {@code pos} must be written (false: it must keep its poison). */
    public boolean written(int pos) { return srcRank != null && srcRank[pos] >= 0; }
  }

  /** The outcome of one call on every rank. */
  public static final class Result {
    /** The first violation (the text every rank's CommCapacityException must end with), or null. */
    public final String error;
    /** By rank. */
    public final RankResult[] ranks;

    Result(String error, RankResult[] ranks) {
      this.error = error;
      this.ranks = ranks;
    }

    public boolean ok() { return error == null; }
  }

  /**
   * The expected outcome of an allToAllV on {@code n} ranks. {@code inCounts[i]} / {@code outCounts[i]}
   * are the element counts of rank i's {@code in} / {@code out}; {@code sendOffsets} and
   * {@code recvOffsets} both null (packed layout) or both given (slot layout). Output arrays of the
   * result are sized {@code outCounts[j]} (must fit an int).
   */
  public static Result expected(int n, long[] inCounts, long[] outCounts, long[][] sendCounts,
                                long[][] sendOffsets, long[][] recvOffsets) {
    String err = violation(n, inCounts, outCounts, sendCounts, sendOffsets, recvOffsets);
    RankResult[] rs = new RankResult[n];
    for (int j = 0; j < n; j++) {
      long[] rc = new long[n];
      for (int i = 0; i < n; i++) rc[i] = sendCounts[i][j];
      if (err != null) {
        rs[j] = new RankResult(rc, null, null);
        continue;
      }
      int len = Math.toIntExact(outCounts[j]);
      int[] sr = new int[len];
      long[] si = new long[len];
      Arrays.fill(sr, -1);
      Arrays.fill(si, -1);
      long packedAt = 0;
      for (int i = 0; i < n; i++) {
        long from = sendOffsets != null ? sendOffsets[i][j] : prefix(sendCounts[i], j);
        long to = recvOffsets != null ? recvOffsets[j][i] : packedAt;
        for (long k = 0; k < sendCounts[i][j]; k++) {
          sr[(int) (to + k)] = i;
          si[(int) (to + k)] = from + k;
        }
        packedAt += sendCounts[i][j];
      }
      rs[j] = new RankResult(rc, sr, si);
    }
    return new Result(err, rs);
  }

  /**
   * The first violation as text (what every rank's exception ends with), or null when the call is
   * valid: the verdict of {@link AllToAllVPlan}, the one definition both backends use, whose scan
   * order and texts {@code AllToAllVReferenceTest} pins down by hand.
   */
  public static String violation(int n, long[] inCounts, long[] outCounts, long[][] sendCounts,
                                 long[][] sendOffsets, long[][] recvOffsets) {
    AllToAllVPlan.Verdict v = AllToAllVPlan.of(n, inCounts, outCounts, sendCounts, sendOffsets, recvOffsets).verdict();
    return v == null ? null : v.message();
  }

  private static long prefix(long[] row, int j) {
    long s = 0;
    for (int q = 0; q < j; q++) s += row[q];
    return s;
  }

  // ------------------------------------------------------------------ layouts

  /** Packed send offsets written out: row i is the exclusive prefix sum of sendCounts[i]. */
  public static long[][] packedSendOffsets(long[][] sendCounts) {
    long[][] o = new long[sendCounts.length][];
    for (int i = 0; i < sendCounts.length; i++) {
      o[i] = new long[sendCounts[i].length];
      for (int j = 0; j < o[i].length; j++) o[i][j] = prefix(sendCounts[i], j);
    }
    return o;
  }

  /** Elements rank j receives in all: the column sum. */
  public static long received(long[][] sendCounts, int j) {
    long s = 0;
    for (long[] row : sendCounts) s += row[j];
    return s;
  }

  /** Elements rank i sends in all: the row sum. */
  public static long sent(long[][] sendCounts, int i) {
    long s = 0;
    for (long v : sendCounts[i]) s += v;
    return s;
  }

  /**
   * Fixed per-sender slots of {@code capacity} elements on every receiver: recvOffsets[j][i] = i * capacity
   * (so out.count() = n * capacity).
   */
  public static long[][] uniformSlots(int n, long capacity) {
    long[][] o = new long[n][n];
    for (int j = 0; j < n; j++) for (int i = 0; i < n; i++) o[j][i] = i * capacity;
    return o;
  }

  /** Send offsets of a shuffled, gapped input layout, and the input sizes it needs. */
  public record SendLayout(long[][] sendOffsets, long[] inCounts) {}

  /**
   * Places each rank's blocks in its input in a random order with random gaps of up to {@code maxGap}
   * elements before each block (and after the last), so sendOffsets are neither sorted nor prefix sums.
   */
  public static SendLayout scatteredSendOffsets(long[][] sendCounts, int maxGap, long seed) {
    int n = sendCounts.length;
    Random rnd = new Random(seed);
    long[][] o = new long[n][n];
    long[] in = new long[n];
    for (int i = 0; i < n; i++) {
      int[] order = permutation(n, rnd);
      long at = 0;
      for (int j : order) {
        at += maxGap > 0 ? rnd.nextInt(maxGap + 1) : 0;
        o[i][j] = at;
        at += sendCounts[i][j];
      }
      in[i] = at + (maxGap > 0 ? rnd.nextInt(maxGap + 1) : 0);
    }
    return new SendLayout(o, in);
  }

  // ------------------------------------------------------------------ skewed counts

  /** Count distributions for {@link #skewedCounts}. */
  public enum Skew {
    /** Random weights with about 40% of the pairs zero (at least one non-zero per sender). */
    ZEROS,
    /** One receiver (chosen by the seed) gets everything from every sender. */
    ONE_RECEIVES_ALL,
    /** Zipf-like (exponent 1.2): each sender's k-th favourite receiver (a random order) gets ~1/(k+1)^1.2. */
    ZIPF
  }

  /**
   * counts[i][j] for {@code totals.length} ranks, with row i summing exactly to {@code totals[i]}, drawn
   * from {@code skew} with {@code seed} (deterministic: every rank can compute the whole matrix).
   */
  public static long[][] skewedCounts(long[] totals, Skew skew, long seed) {
    int n = totals.length;
    Random rnd = new Random(seed * 0x9E3779B97F4A7C15L + skew.ordinal());
    long[][] c = new long[n][n];
    int hot = rnd.nextInt(n);
    for (int i = 0; i < n; i++) {
      if (totals[i] < 0) throw new IllegalArgumentException("negative total");
      double[] w = new double[n];
      switch (skew) {
        case ONE_RECEIVES_ALL:
          w[hot] = 1;
          break;
        case ZIPF: {
          int[] order = permutation(n, rnd);
          for (int k = 0; k < n; k++) w[order[k]] = 1 / Math.pow(k + 1, 1.2);
          break;
        }
        default: {
          boolean any = false;
          for (int j = 0; j < n; j++) {
            w[j] = rnd.nextDouble() < 0.4 ? 0 : 0.1 + rnd.nextDouble();
            any |= w[j] > 0;
          }
          if (!any) w[rnd.nextInt(n)] = 1;
        }
      }
      c[i] = distribute(totals[i], w, rnd);
    }
    return c;
  }

  /** Splits {@code total} by the weights: floors of the shares, the remainder to random weighted entries. */
  private static long[] distribute(long total, double[] w, Random rnd) {
    int n = w.length;
    double sum = 0;
    for (double x : w) sum += x;
    long[] c = new long[n];
    long given = 0;
    for (int j = 0; j < n; j++) {
      c[j] = (long) Math.floor(total * (w[j] / sum));
      given += c[j];
    }
    while (given < total) {
      int j = rnd.nextInt(n);
      if (w[j] > 0) {
        c[j]++;
        given++;
      }
    }
    while (given > total) { // floating-point rounding up, in theory
      int j = rnd.nextInt(n);
      if (c[j] > 0) {
        c[j]--;
        given--;
      }
    }
    return c;
  }

  private static int[] permutation(int n, Random rnd) {
    int[] p = new int[n];
    for (int k = 0; k < n; k++) p[k] = k;
    for (int k = n - 1; k > 0; k--) {
      int r = rnd.nextInt(k + 1);
      int t = p[k];
      p[k] = p[r];
      p[r] = t;
    }
    return p;
  }
}
