package io.sparkcomms.collectives;

import java.util.Arrays;
import java.util.Random;

/**
 * Reference semantics of {@link Communicator#allToAllV}, independent of any backend, for the host and
 * GPU tests. Indices: {@code sendCounts[i][j]} is what rank i sends to rank j; {@code sendOffsets[i]}
 * and {@code recvOffsets[j]} are rank i's / rank j's offset tensors (both null for the packed layout).
 *
 * <p>Checks, and which violation is reported first (every rank must report the same one): receivers
 * j = 0..n-1 in order; for receiver j first its recvOffsets (slot layout only; i = 0..n-1: outside
 * [0, out.count] of rank j, then below recvOffsets[i-1]), then senders i = 0..n-1, each block (i to j)
 * checked for, in order: a negative count; lying outside rank i's input (packed: it starts at the
 * prefix sum of rank i's counts before j); not fitting rank j's output (packed: it starts at the
 * prefix sum of the counts received from ranks before i) or its slot (slot layout). The messages are
 * those of the host backend, which prefixes them with "allToAllV #call: ".
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
    checkShapes(n, inCounts, outCounts, sendCounts, sendOffsets, recvOffsets);
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

  /** The first violation (see the class comment), or null when the call is valid. */
  public static String violation(int n, long[] inCounts, long[] outCounts, long[][] sendCounts,
                                 long[][] sendOffsets, long[][] recvOffsets) {
    checkShapes(n, inCounts, outCounts, sendCounts, sendOffsets, recvOffsets);
    boolean slots = recvOffsets != null;
    for (int j = 0; j < n; j++) {
      if (slots) {
        for (int i = 0; i < n; i++) {
          long v = recvOffsets[j][i];
          if (v < 0 || v > outCounts[j]) {
            return "receiver rank " + j + ": recvOffsets[" + i + "] = " + v + " lies outside its output of " + outCounts[j] + " elements";
          }
          if (i > 0 && v < recvOffsets[j][i - 1]) {
            return "receiver rank " + j + ": recvOffsets[" + i + "] = " + v + " is below recvOffsets[" + (i - 1) + "] = "
                + recvOffsets[j][i - 1] + " (receive offsets must be non-decreasing)";
          }
        }
      }
      for (int i = 0; i < n; i++) {
        long k = sendCounts[i][j];
        if (k < 0) return "sender rank " + i + " sends a negative count " + k + " to receiver rank " + j;
        // the earlier blocks of rank i (receivers < j) passed, so the prefix is a valid sum
        long o = sendOffsets != null ? sendOffsets[i][j] : prefix(sendCounts[i], j);
        if (o < 0 || o > inCounts[i] || k > inCounts[i] - o) {
          return "sender rank " + i + ": its block of " + k + " elements for receiver rank " + j + " at input offset " + o
              + " runs outside its input of " + inCounts[i] + " elements";
        }
        if (slots) {
          long at = recvOffsets[j][i];
          long end = i + 1 < n ? recvOffsets[j][i + 1] : outCounts[j];
          if (k > end - at) {
            return "receiver rank " + j + " cannot hold the " + k + " elements from sender rank " + i
                + ": its slot for rank " + i + " at output offset " + at + " holds " + (end - at) + " elements";
          }
        } else {
          long at = 0;
          for (int q = 0; q < i; q++) at += sendCounts[q][j];
          if (k > outCounts[j] - at) {
            return "receiver rank " + j + " cannot hold the " + k + " elements from sender rank " + i
                + " at output offset " + at + ": its output holds " + outCounts[j] + " elements";
          }
        }
      }
    }
    return null;
  }

  private static long prefix(long[] row, int j) {
    long s = 0;
    for (int q = 0; q < j; q++) s += row[q];
    return s;
  }

  private static void checkShapes(int n, long[] inCounts, long[] outCounts, long[][] sendCounts,
                                  long[][] sendOffsets, long[][] recvOffsets) {
    if ((sendOffsets == null) != (recvOffsets == null)) throw new IllegalArgumentException("give both offset matrices or neither");
    if (inCounts.length != n || outCounts.length != n || sendCounts.length != n) throw new IllegalArgumentException("need n rows");
    for (int i = 0; i < n; i++) {
      if (sendCounts[i].length != n) throw new IllegalArgumentException("sendCounts row " + i + " needs n entries");
      if (sendOffsets != null && (sendOffsets.length != n || sendOffsets[i].length != n || recvOffsets.length != n || recvOffsets[i].length != n)) {
        throw new IllegalArgumentException("offset matrices must be n x n");
      }
    }
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
