package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.CommMismatchException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * What the host algorithms share: this rank's view of the segment (every rank's input and result
 * areas) and the steps of every call over it. A call publishes its descriptor and passes the first
 * barrier ({@link #begin}: mismatches raise on every rank), then each chunk ends with a barrier
 * ({@link #end}), so no rank overwrites an area a peer still reads.
 *
 * <p><b>Calls of one barrier.</b> A call whose staged part fits half an input area ({@link #run})
 * stages it in the half of its call's parity and ends at its first barrier: its peers may still
 * read that half when this rank returns. Ordering argument: the next call that writes the same
 * half is call s+2 at the earliest, and every rank passes the first barrier of call s+1 only after
 * every rank has arrived there, that is, finished reading call s; a call that writes the whole
 * input or result area first passes that barrier ({@link #settle}) and then stages. So each call
 * of one chunk costs one hand-over between the ranks instead of two.
 */
final class ShmContext {
  final int rank;
  final int size;
  /** Bytes per input area (and per result area). */
  final int staging;
  /** Per rank: [0, S) of its data region. */
  final ByteBuffer[] inputs;
  /** Per rank: [S, 2S) of its data region. */
  final ByteBuffer[] results;
  /** Bytes per half input area (a multiple of 64). */
  final int halfStaging;
  /** By parity, per rank: [0, H) or [H, 2H) of its input area, H = {@link #halfStaging}. */
  private final ByteBuffer[][] halves;
  private final ShmSegment seg;
  private final ShmSignals signals;
  private long seq;
  /** The last call ended at its first barrier: peers may still read its half of the input areas. */
  private boolean readsPending;
  /** {@link #settle} passed the current call's first barrier already. */
  private boolean settled;

  ShmContext(ShmSegment seg, ShmSignals signals, int rank, int size) {
    this.seg = seg;
    this.signals = signals;
    this.rank = rank;
    this.size = size;
    this.staging = (int) seg.stagingBytes();
    this.inputs = new ByteBuffer[size];
    this.results = new ByteBuffer[size];
    for (int r = 0; r < size; r++) {
      ByteBuffer d = seg.data[r];
      inputs[r] = d.duplicate().position(0).limit(staging).slice().order(ByteOrder.nativeOrder());
      results[r] = d.duplicate().position(staging).limit(2 * staging).slice().order(ByteOrder.nativeOrder());
    }
    this.halfStaging = staging / 2 & ~63;
    this.halves = new ByteBuffer[2][size];
    for (int h = 0; h < 2; h++) {
      for (int r = 0; r < size; r++) {
        int at = h * halfStaging;
        halves[h][r] = inputs[r].duplicate().position(at).limit(at + halfStaging).slice().order(ByteOrder.nativeOrder());
      }
    }
  }

  /** The sequence number of the current call. */
  long seq() { return seq; }

  /** "allReduce #12": the current call, for messages. */
  String label(HostCall c) { return c.name() + " #" + seq; }

  /**
   * Publishes this call's descriptor, passes the first barrier, and checks that every rank made the
   * same call. Descriptors alternate between two slots by call parity: a rank can only write the
   * slot of call s+2 after the first barrier of call s+1, which every rank enters only after it has
   * finished reading the descriptors of call s.
   */
  void begin(HostCall c) {
    readsPending = false;  // every rank arrives here only after finishing its previous call
    long s = ++seq;
    ByteBuffer b = seg.ctrl;
    CallDescriptor mine = CallDescriptor.of(s, c);
    mine.write(b, ShmSegment.descriptor(rank, s));
    String what = label(c);
    signals.barrier(what);
    if (c.problem() != null) throw new IllegalArgumentException(c.problem());
    CallDescriptor[] all = new CallDescriptor[size];
    for (int p = 0; p < size; p++) all[p] = CallDescriptor.read(b, ShmSegment.descriptor(p, s), p);
    for (int p = 0; p < size; p++) {
      if (all[p].problem() != null) throw new CommMismatchException(what + ": rank " + p + " rejected its arguments: " + all[p].problem());
    }
    for (int p = 0; p < size; p++) {
      if (all[p].seq() != s || !mine.sameCall(all[p])) {
        throw new CommMismatchException(what + ": ranks disagree: rank " + rank + " called " + mine.describe()
            + ", rank " + p + " called " + all[p].describe());
      }
    }
  }

  /**
   * Before a call stages into areas a previous call of one barrier may still be read from: passes
   * the current call's first barrier now (with the descriptor check), so its {@link #sync} of the
   * first chunk is a plain barrier.
   */
  void settle(HostCall c) {
    settled = false;  // a call that raised between its settle and its first sync leaves no trace
    if (!readsPending) return;
    begin(c);
    settled = true;
  }

  /** First barrier of a call (with the descriptor check, unless {@link #settle} did it) or of a later chunk. */
  void sync(HostCall c, boolean first) {
    if (first && !settled) {
      begin(c);
    } else {
      settled = false;
      signals.barrier(label(c));
    }
  }

  /** A barrier inside a chunk, {@code step} naming it for errors. */
  void barrier(HostCall c, String step) { signals.barrier(label(c) + " (" + step + ")"); }

  /** The barrier that ends a chunk. */
  void end(HostCall c) { signals.barrier(label(c) + " (end)"); }

  /** One chunk of a call: elements [off, off + k); {@code first} for the chunk that checks the call. */
  @FunctionalInterface
  interface Chunk {
    void run(long off, int k, boolean first);
  }

  /** Part of a chunk over elements [off, off + k) staged in {@code areas}, one per rank. */
  @FunctionalInterface
  interface Part {
    void run(long off, int k, ByteBuffer[] areas);
  }

  /**
   * A call that stages at most {@code count} elements of {@code elementSize} bytes per rank into the
   * input areas, in chunks: {@code stage} writes this rank's part of a chunk (skipped for a call
   * with a local problem), then the ranks sync, then {@code read} reads the peers' parts. A call
   * that fits half an input area runs in one chunk on the half of its parity and ends at its first
   * barrier (see the class comment); a larger one ends each chunk with a barrier.
   */
  void run(HostCall c, long count, int elementSize, Part stage, Part read) {
    if (count <= halfStaging / elementSize) {
      ByteBuffer[] areas = halves[(int) ((seq + 1) & 1)];  // the parity of the call begin() numbers next
      int k = (int) Math.max(0, count);
      if (c.problem() == null) stage.run(0, k, areas);
      begin(c);
      read.run(0, k, areas);
      readsPending = true;
      return;
    }
    forEachChunk(c, count, staging / elementSize, (off, k, first) -> {
      if (c.problem() == null) stage.run(off, k, inputs);
      sync(c, first);
      read.run(off, k, inputs);
      end(c);
    });
  }

  /**
   * Runs {@code body} over [0, count) in chunks of at most {@code kmax} elements — at least once, so
   * an empty call still passes the first barrier and its descriptor check. The body stages, syncs
   * and ends each chunk itself; a previous call's pending reads are settled first.
   */
  void forEachChunk(HostCall c, long count, int kmax, Chunk body) {
    settle(c);
    boolean first = true;
    for (long off = 0; first || off < count; off += kmax, first = false) {
      body.run(off, (int) Math.min(kmax, count - off), first);
    }
  }
}
