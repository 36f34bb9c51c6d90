package io.sparkcomms.collectives.plan;

import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;

/**
 * The size check of one allToAllV and its verdict: the one definition of which problem a call has,
 * of its text, and of where each block goes, used by the host backend (which builds the matrix from
 * its peers' sizes), by the GPU backend (whose kernel reaches the verdict on the device and reports it
 * as five status words, {@link Verdict#fromStatusWords}) and by the test oracle.
 *
 * <p>Indices: {@code counts[i][j]} is what rank i sends to rank j; {@code sendOffsets[i][j]} where that
 * block starts in rank i's input; {@code recvOffsets[j][i]} where the block from rank i starts in rank
 * j's output (both null: the packed layout, offsets = exclusive prefix sums of the counts). Capacities
 * ({@code inCounts}, {@code outCounts}) are in elements.
 *
 * <p>Scan order, the same as the device kernel's: receivers r = 0..n-1; for receiver r first its slots
 * (slot layout; q = 0..n-1: slot q spans recvOffsets[r][q] to recvOffsets[r][q+1], the last to the end
 * of the output; a slot that starts below 0, ends before it starts or past the output is
 * {@link Problem#RECV_OFFSETS}), then senders q = 0..n-1, each block checked for a negative count
 * ({@link Problem#NEGATIVE}), lying outside the sender's input ({@link Problem#SEND_RANGE}: capacity =
 * input count - block offset), and not fitting the receiver's room ({@link Problem#OVERFLOW}: capacity
 * = the slot, or in the packed layout the output left after the earlier senders' blocks). The first
 * problem is the verdict. Every rank sees the same matrix, so every rank reaches the same verdict.
 */
public final class AllToAllVPlan {
  /** The problems, with the {@code SC_A2AV_*} codes of the C ABI. */
  public enum Problem {
    OVERFLOW(1), NEGATIVE(2), SEND_RANGE(3), RECV_OFFSETS(4), MISMATCH(5);

    private final int code;

    Problem(int code) { this.code = code; }

    public int code() { return code; }
  }

  /**
   * A call's problem as the five words of the C ABI's allToAllV status: code, receiver, sender, count,
   * capacity. RECV_OFFSETS: sender = the slot's rank, count..capacity = the slot's start..end.
   * MISMATCH: receiver = the rank that disagrees with rank 0, count / capacity = its layout / rank 0's
   * (0 packed, 1 offsets).
   */
  public record Verdict(Problem problem, long receiver, long sender, long count, long capacity) {
    /** The text of this verdict (the same for both backends). */
    public String message() {
      switch (problem) {
        case NEGATIVE:
          return "sender rank " + sender + " sends a negative count " + count + " to receiver rank " + receiver;
        case SEND_RANGE: {
          String head = "sender rank " + sender + ": its block of " + count + " elements for receiver rank " + receiver;
          // capacity = input count - offset: at least the count only when the offset is negative,
          // negative only when the offset lies past the input's end
          if (capacity >= count) return head + " starts at a negative input offset";
          if (capacity < 0) return head + " starts " + (-capacity) + " elements past the end of its input";
          return head + " runs past the end of its input: " + capacity + " elements from the block's offset to the end";
        }
        case OVERFLOW:
          return "receiver rank " + receiver + " cannot hold the " + count + " elements from sender rank " + sender
              + ": its room for them is " + capacity + " elements";
        case RECV_OFFSETS:
          return "receiver rank " + receiver + ": its slot for sender rank " + sender + " spans output offsets " + count
              + ".." + capacity + ", reversed or outside its output (receive offsets must be non-decreasing and within the output)";
        default:
          return "ranks disagree on the dtype or the layout: rank " + receiver + " " + layout(count)
              + ", rank 0 " + layout(capacity);
      }
    }

    private static String layout(long l) { return l == 0 ? "used the packed layout" : l == 1 ? "passed offsets" : "sent layout " + l; }

    /**
     * The exception every rank raises for this verdict on call {@code call} (e.g. "allToAllV #12"):
     * {@code call + " (no output written, recvCounts were): " + message()}.
     */
    public CommMismatchException exception(String call) {
      String m = call + " (no output written, recvCounts were): " + message();
      return problem == Problem.MISMATCH ? new CommMismatchException(m) : new CommCapacityException(m);
    }

    /**
     * The verdict in the C ABI's status words ({@code sc_alltoallv_status}), null for SC_A2AV_OK.
     * The words come from the native side: a code outside the ABI's, or ranks outside 0..n-1, are
     * reported as a native error rather than trusted.
     */
    public static Verdict fromStatusWords(long[] st, int n) {
      if (st == null || st.length < 5) throw new CommException("allToAllV status: expected 5 words");
      if (st[0] == 0) return null;
      Problem p = null;
      for (Problem x : Problem.values()) if (x.code == st[0]) p = x;
      if (p == null) throw new CommException("allToAllV status: unknown code " + st[0]);
      boolean ranksOk = st[1] >= 0 && st[1] < n && (p == Problem.MISMATCH || (st[2] >= 0 && st[2] < n));
      if (!ranksOk) throw new CommException("allToAllV status " + p + ": rank words " + st[1] + ", " + st[2] + " outside 0.." + (n - 1));
      return new Verdict(p, st[1], st[2], st[3], st[4]);
    }
  }

  private final int n;
  private final long[] inCounts;
  private final long[] outCounts;
  private final long[][] counts;
  private final long[][] sendOffsets;
  private final long[][] recvOffsets;

  private AllToAllVPlan(int n, long[] inCounts, long[] outCounts, long[][] counts, long[][] sendOffsets, long[][] recvOffsets) {
    this.n = n;
    this.inCounts = inCounts;
    this.outCounts = outCounts;
    this.counts = counts;
    this.sendOffsets = sendOffsets;
    this.recvOffsets = recvOffsets;
  }

  /**
   * The plan over a whole matrix (arrays are used, not copied). Raises {@link IllegalArgumentException}
   * for arrays of the wrong shape: n rows of n entries, both offset matrices or neither.
   */
  public static AllToAllVPlan of(int n, long[] inCounts, long[] outCounts, long[][] counts,
                                 long[][] sendOffsets, long[][] recvOffsets) {
    if ((sendOffsets == null) != (recvOffsets == null)) throw new IllegalArgumentException("give both offset matrices or neither");
    if (n < 1 || inCounts.length != n || outCounts.length != n || counts.length != n) throw new IllegalArgumentException("need n rows");
    for (int i = 0; i < n; i++) {
      if (counts[i].length != n) throw new IllegalArgumentException("counts row " + i + " needs n entries");
      if (sendOffsets != null && (sendOffsets.length != n || sendOffsets[i].length != n || recvOffsets.length != n
          || recvOffsets[i].length != n)) {
        throw new IllegalArgumentException("offset matrices must be n x n");
      }
    }
    return new AllToAllVPlan(n, inCounts, outCounts, counts, sendOffsets, recvOffsets);
  }

  public int ranks() { return n; }
  public boolean slots() { return recvOffsets != null; }
  /** What rank i sends to rank j. */
  public long count(int i, int j) { return counts[i][j]; }

  /** The first problem in the scan order (class comment), or null when every block fits. */
  public Verdict verdict() {
    boolean slots = slots();
    long[] sendAt = new long[n]; // packed: where sender q's block for the current receiver starts
    for (int r = 0; r < n; r++) {
      long out = outCounts[r];
      if (slots) {
        for (int q = 0; q < n; q++) {
          long start = recvOffsets[r][q], end = q + 1 < n ? recvOffsets[r][q + 1] : out;
          if (start < 0 || end < start || end > out) return new Verdict(Problem.RECV_OFFSETS, r, q, start, end);
        }
      }
      long run = 0;
      for (int q = 0; q < n; q++) {
        long cnt = counts[q][r], in = inCounts[q];
        long off = slots ? sendOffsets[q][r] : sendAt[q];
        if (cnt < 0) return new Verdict(Problem.NEGATIVE, r, q, cnt, 0);
        if (off < 0 || off > in || cnt > in - off) return new Verdict(Problem.SEND_RANGE, r, q, cnt, in - off);
        long start = slots ? recvOffsets[r][q] : run;
        long cap = (slots ? (q + 1 < n ? recvOffsets[r][q + 1] : out) : out) - start;
        if (cnt > cap) return new Verdict(Problem.OVERFLOW, r, q, cnt, cap);
        sendAt[q] += cnt; // cnt <= in - off: no overflow
        run += cnt;       // cnt <= out - run
      }
    }
    return null;
  }

  /** Where rank i's block for rank j starts in rank i's input (valid once {@link #verdict()} is null). */
  public long sendOffset(int i, int j) {
    if (slots()) return sendOffsets[i][j];
    long s = 0;
    for (int q = 0; q < j; q++) s += counts[i][q];
    return s;
  }

  /** Where the block from rank i starts in rank j's output (valid once {@link #verdict()} is null). */
  public long recvOffset(int j, int i) {
    if (slots()) return recvOffsets[j][i];
    long s = 0;
    for (int q = 0; q < i; q++) s += counts[q][j];
    return s;
  }
}
