package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.plan.AllToAllVPlan;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * allToAllV over the shared segment.
 *
 * <p>Sizes: before the first barrier every rank writes its sizes into its result area (unused by
 * allToAllV otherwise), as native longs: [0] in.count, [8] out.count, [16..) sendCounts[n], then for
 * the slot layout sendOffsets[n] and recvOffsets[n] ({@code 16 + 24n <= 1552} bytes; staging is
 * at least 4 KiB).
 * The descriptor carries the layout, so ranks that disagree on it (or on the dtype) fail in
 * {@link ShmContext#begin}. After the first barrier every rank reads every rank's sizes, so all hold
 * the same n x n matrix, check it ({@link AllToAllVPlan#verdict()}) and write recvCounts. A
 * violation: one more barrier (so nobody overwrites the sizes a slower peer still reads), then the
 * same exception on every rank, with nothing written to out.
 *
 * <p>Data: rank i's stream is its blocks for ranks 0..n-1 concatenated (in the packed layout that is
 * in[0, total_i) itself). Round r stages stream elements [r*K, (r+1)*K) (K = staging / element size)
 * into i's input area; after a barrier every receiver copies the parts of its blocks that lie in
 * that window from every sender's input area; a barrier ends the round. Every rank computes the
 * same round count from the matrix: max_i ceil(total_i / K) (an extra end barrier when it is 0).
 */
final class HostAllToAllV {
  private static final int V_IN = 0, V_OUT = 8, V_COUNTS = 16;

  private final ShmContext x;

  HostAllToAllV(ShmContext x) { this.x = x; }

  void run(HostCall c) {
    Splits sp = c.plan().splits();
    boolean offsets = sp.hasOffsets();
    int n = x.size, rank = x.rank;
    HostTensor in = c.in(), out = c.out();
    if (c.problem() == null) {
      ByteBuffer mine = x.results[rank];
      mine.putLong(V_IN, in.count());
      mine.putLong(V_OUT, out.count());
      ((HostTensor) sp.sendCounts()).copyTo(0, n, mine, V_COUNTS);
      if (offsets) {
        ((HostTensor) sp.sendOffsets()).copyTo(0, n, mine, V_COUNTS + 8 * n);
        ((HostTensor) sp.recvOffsets()).copyTo(0, n, mine, V_COUNTS + 16 * n);
      }
    }
    x.begin(c);
    AllToAllVPlan plan = readMatrix(offsets);
    AllToAllVPlan.Verdict verdict = plan.verdict();
    ByteBuffer rc = ByteBuffer.allocate(8 * n).order(ByteOrder.nativeOrder());
    for (int p = 0; p < n; p++) rc.putLong(8 * p, plan.count(p, rank));
    ((HostTensor) sp.recvCounts()).copyFrom(rc, 0, 0, n);
    if (verdict != null) {
      x.end(c); // peers may still read our sizes; the next call overwrites them
      throw verdict.exception(x.label(c));
    }
    move(c, plan);
  }

  /** Every rank's sizes, from the result areas (any values: the verdict judges them). */
  private AllToAllVPlan readMatrix(boolean offsets) {
    int n = x.size;
    long[] inCount = new long[n], outCount = new long[n];
    long[][] counts = new long[n][n];
    long[][] sendOff = offsets ? new long[n][n] : null;
    long[][] recvOff = offsets ? new long[n][n] : null;
    for (int p = 0; p < n; p++) {
      ByteBuffer b = x.results[p];
      inCount[p] = b.getLong(V_IN);
      outCount[p] = b.getLong(V_OUT);
      for (int q = 0; q < n; q++) {
        counts[p][q] = b.getLong(V_COUNTS + 8 * q);
        if (offsets) {
          sendOff[p][q] = b.getLong(V_COUNTS + 8 * (n + q));
          recvOff[p][q] = b.getLong(V_COUNTS + 8 * (2 * n + q));
        }
      }
    }
    return AllToAllVPlan.of(n, inCount, outCount, counts, sendOff, recvOff);
  }

  /** The data rounds of a call whose sizes passed the verdict. */
  private void move(HostCall c, AllToAllVPlan plan) {
    int n = x.size, rank = x.rank;
    HostTensor in = c.in(), out = c.out();
    // where each block starts: in the sender's stream, in its input, and in the receiver's output
    long[][] streamAt = new long[n][n];
    long rounds = 0;
    int es = c.dtype().size();
    int kmax = x.staging / es;
    for (int i = 0; i < n; i++) {
      long t = 0;
      for (int j = 0; j < n; j++) {
        streamAt[i][j] = t;
        t += plan.count(i, j);
      }
      rounds = Math.max(rounds, (t + kmax - 1) / kmax);
    }
    long[] sendAt = new long[n];  // this rank as sender, by receiver
    long[] recvAt = new long[n];  // this rank as receiver, by sender
    for (int j = 0; j < n; j++) {
      sendAt[j] = plan.sendOffset(rank, j);
      recvAt[j] = plan.recvOffset(rank, j);
    }
    HostTensor src = in;
    // Over several rounds, output written in one round could overwrite input that a later round reads
    // when the two share memory (in place or partly): copy the input first. One round stages all of the
    // input before it writes any output, so it needs no copy.
    boolean mayShare = in.overlap(out) != HostTensor.Overlap.DISJOINT;
    if (rounds > 1 && mayShare) src = snapshot(in);
    for (long r = 0; r < rounds; r++) {
      long lo = r * kmax, hi = lo + kmax;
      // stage our stream's window [lo, hi)
      for (int j = 0; j < n; j++) {
        long a = Math.max(lo, streamAt[rank][j]), e = Math.min(hi, streamAt[rank][j] + plan.count(rank, j));
        if (a >= e) continue;
        src.copyTo(sendAt[j] + (a - streamAt[rank][j]), (int) (e - a), x.inputs[rank], (int) (a - lo) * es);
      }
      x.barrier(c, "round " + r + " of " + rounds);
      // our blocks' parts in that window, from every sender
      for (int i = 0; i < n; i++) {
        long a = Math.max(lo, streamAt[i][rank]), e = Math.min(hi, streamAt[i][rank] + plan.count(i, rank));
        if (a >= e) continue;
        out.copyFrom(x.inputs[i], (int) (a - lo) * es, recvAt[i] + (a - streamAt[i][rank]), (int) (e - a));
      }
      x.end(c);
    }
    if (rounds == 0) x.end(c);
  }

  /** A private copy of a tensor (the input of an allToAllV whose output may share its memory). */
  private static HostTensor snapshot(HostTensor t) {
    Object a = t.array();
    if (a == null) {
      // a direct buffer: copy through a heap array of the element type
      HostTensor copy = HostTensor.allocate(t.dtype(), (int) t.count());
      ByteBuffer tmp = ByteBuffer.allocate((int) t.bytes()).order(ByteOrder.nativeOrder());
      t.copyTo(0, (int) t.count(), tmp, 0);
      copy.copyFrom(tmp, 0, 0, (int) t.count());
      return copy;
    }
    switch (t.dtype()) {
      case FLOAT32: return HostTensor.of(((float[]) a).clone());
      case FLOAT64: return HostTensor.of(((double[]) a).clone());
      case INT32: return HostTensor.of(((int[]) a).clone());
      case INT64: return HostTensor.of(((long[]) a).clone());
      case BFLOAT16: return HostTensor.bf16(((short[]) a).clone());
      default: return HostTensor.fp16(((short[]) a).clone());
    }
  }
}
