package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.CommMismatchException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * What the host algorithms share: this rank's view of the segment (every rank's input and result
 * areas) and the steps of every call over it. A call publishes its descriptor and passes the first
 * barrier ({@link #begin}: mismatches raise on every rank), then each chunk ends with a barrier
 * ({@link #end}), so no rank overwrites an area a peer still reads.
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
  private final ShmSegment seg;
  private final ShmSignals signals;
  private long seq;

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

  /** First barrier of a call (with the descriptor check) or of a later chunk. */
  void sync(HostCall c, boolean first) {
    if (first) begin(c);
    else signals.barrier(label(c));
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

  /**
   * Runs {@code body} over [0, count) in chunks of at most {@code kmax} elements — at least once, so
   * an empty call still passes the first barrier and its descriptor check.
   */
  static void forEachChunk(long count, int kmax, Chunk body) {
    boolean first = true;
    for (long off = 0; first || off < count; off += kmax, first = false) {
      body.run(off, (int) Math.min(kmax, count - off), first);
    }
  }
}
