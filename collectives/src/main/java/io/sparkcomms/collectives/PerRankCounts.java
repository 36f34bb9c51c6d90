package io.sparkcomms.collectives;

import java.util.Arrays;

/**
 * The element count of every rank in an allGatherV or reduceScatterV: a copy of the caller's array
 * (later changes to it do not reach a call in flight), its exclusive prefix sums (where each rank's
 * block starts) and its total. Every rank must pass the same counts; the backends compare
 * {@link #fingerprint()} across ranks before any data moves, so ranks that disagree fail the call on
 * every rank with {@link CommMismatchException}.
 */
public final class PerRankCounts {
  private final long[] counts;
  private final long[] starts;
  private final long total;
  private final long max;

  private PerRankCounts(long[] counts, long[] starts, long total, long max) {
    this.counts = counts;
    this.starts = starts;
    this.total = total;
    this.max = max;
  }

  /**
   * The counts of {@code size} ranks, or the reason they cannot be: null, a length other than
   * {@code size}, a negative count, or a total above {@link Long#MAX_VALUE}.
   *
   * @throws IllegalArgumentException with the reason
   */
  public static PerRankCounts of(long[] counts, int size) {
    if (counts == null) throw new IllegalArgumentException("counts is null");
    if (counts.length != size) {
      throw new IllegalArgumentException("counts has " + counts.length + " elements, needs one per rank (" + size + ")");
    }
    long[] c = counts.clone();
    long[] s = new long[size];
    long t = 0, m = 0;
    for (int r = 0; r < size; r++) {
      if (c[r] < 0) throw new IllegalArgumentException("counts[" + r + "] = " + c[r] + " is negative");
      s[r] = t;
      try {
        t = Math.addExact(t, c[r]);
      } catch (ArithmeticException e) {
        throw new IllegalArgumentException("counts add up to more than " + Long.MAX_VALUE + " elements");
      }
      m = Math.max(m, c[r]);
    }
    return new PerRankCounts(c, s, t, m);
  }

  /** Number of ranks. */
  public int size() { return counts.length; }

  /** Rank {@code r}'s count. */
  public long count(int r) { return counts[r]; }

  /** Where rank {@code r}'s block starts: the sum of the counts of ranks 0..r-1. */
  public long start(int r) { return starts[r]; }

  /** The sum of all counts. */
  public long total() { return total; }

  /** The largest count. */
  public long max() { return max; }

  /** A copy of the counts. */
  public long[] toArray() { return counts.clone(); }

  /**
   * A 64-bit digest of the counts (FNV-1a over their bytes, then a final mix), equal on ranks with
   * equal counts, never 0 (0 means "no counts" in the host call descriptor). The host backend
   * compares it across ranks; the GPU backend compares every count as well.
   */
  public long fingerprint() {
    long h = Fnv.of(counts, 8);
    h ^= h >>> 33;
    h *= 0xff51afd7ed558ccdL;
    h ^= h >>> 33;
    if (h == 0 || h == Long.MIN_VALUE) h = 1;
    return h;
  }

  @Override public boolean equals(Object o) { return o instanceof PerRankCounts p && Arrays.equals(counts, p.counts); }

  @Override public int hashCode() { return Arrays.hashCode(counts); }

  @Override public String toString() {
    if (counts.length <= 8) return Arrays.toString(counts);
    return Arrays.toString(Arrays.copyOf(counts, 8)).replace("]", ", ...] (" + counts.length + " ranks)");
  }
}
