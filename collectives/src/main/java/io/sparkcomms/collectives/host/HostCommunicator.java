package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CollectiveCall;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.lp.BlockQuantizer;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;

/**
 * The host shared-memory backend: the DDA algorithms (flat one-shot, tree two-shot, direct-access
 * allGather / reduceScatter / allToAll / broadcast) and their FP8 variants, over a segment in
 * /dev/shm that the ranks of one node map. Ranks may be processes or threads of one JVM.
 *
 * <p>Every call: stage this rank's input into its input area, publish a descriptor of the call, pass
 * the first barrier and compare all descriptors (mismatches raise on every rank), then read peers'
 * areas directly. Messages larger than the staging area are processed in chunks; each chunk ends
 * with a barrier, so no rank overwrites an area a peer still reads. allToAllV first exchanges every
 * rank's sizes through the segment, so every rank checks the same global matrix before data moves
 * (see the allToAllV section).
 */
public final class HostCommunicator extends AbstractCommunicator {
  private final ShmSegment seg;
  private final ShmSignals signals;
  private final HostReducer reducer = new HostReducer();
  private final int staging;                // bytes per input area (and per result area)
  private final ByteBuffer[] inputs;        // per rank: [0, S) of its data region
  private final ByteBuffer[] results;       // per rank: [S, 2S)
  private final int[] zeroOffsets;
  private final ByteBuffer scratch = ByteBuffer.allocateDirect(HostReducer.BLOCK * 8).order(ByteOrder.nativeOrder());
  private final BlockQuantizer quantizer;
  private float[] fa = new float[0];
  private float[] fb = new float[0];
  private long seq;
  private volatile boolean aborted;

  private HostCommunicator(int rank, int size, CommOptions o, ShmSegment seg, ProcessId[] watched) {
    super(rank, size, o);
    this.seg = seg;
    this.signals = new ShmSignals(seg, rank, o.timeout(), watched);
    this.staging = (int) seg.stagingBytes();
    this.inputs = new ByteBuffer[size];
    this.results = new ByteBuffer[size];
    for (int r = 0; r < size; r++) {
      ByteBuffer d = seg.data[r];
      inputs[r] = d.duplicate().position(0).limit(staging).slice().order(ByteOrder.nativeOrder());
      results[r] = d.duplicate().position(staging).limit(2 * staging).slice().order(ByteOrder.nativeOrder());
    }
    this.zeroOffsets = new int[size];
    this.quantizer = new BlockQuantizer(o.fp8FormatOrDefault(), o.lpBlockSize());
  }

  /**
   * Creates the communicator of {@code rv.rank()} among {@code rv.size()} ranks. Collective: every
   * rank must call it. Rank 0 creates the segment; the others map it; rank 0 unlinks the file once
   * all have mapped it (or failed).
   */
  public static HostCommunicator create(Rendezvous rv, CommOptions o) {
    int n = rv.size();
    int r = rv.rank();
    if (n > ShmSegment.MAX_RANKS) throw new IllegalArgumentException("host backend supports up to " + ShmSegment.MAX_RANKS + " ranks, got " + n);
    long s = o.stagingBytes();
    ProcessId me = ProcessId.current();
    ShmSegment seg = null;
    String err = null;
    if (r == 0) {
      try {
        seg = ShmSegment.create(n, s);
      } catch (RuntimeException e) {
        err = e.getMessage();
      }
    }
    try {
      // "pid start pid-namespace\n" + rank 0's segment path (or its error)
      String mine = me.pid() + " " + me.startMillis() + " " + me.pidNamespace() + "\n"
          + (r != 0 ? "" : seg != null ? "OK " + seg.path() : "ERR " + err);
      byte[][] all = rv.allGather(mine.getBytes(StandardCharsets.UTF_8), o.timeout());
      ProcessId[] ids = new ProcessId[n];
      String rank0 = null;
      for (int p = 0; p < n; p++) {
        String msg = new String(all[p], StandardCharsets.UTF_8);
        try {
          String[] parts = msg.split("\n", 2);
          String[] id = parts[0].split(" ");
          ids[p] = new ProcessId(Long.parseLong(id[0]), Long.parseLong(id[1]), Long.parseLong(id[2]));
          if (p == 0) rank0 = parts[1];
        } catch (RuntimeException e) {
          throw new CommException("rank " + p + " sent an unreadable greeting (another sparkcomms version?): '"
              + msg.substring(0, Math.min(80, msg.length())) + "'");
        }
      }
      // every rank just answered, so each was alive a moment ago: judge now which peers this process
      // can watch (one that dies from here on is then noticed by the barriers' liveness check)
      ProcessId[] watched = PeerWatch.watchable(ids, r);
      if (rank0.startsWith("ERR ")) throw new CommException("rank 0 could not create the shared-memory segment: " + rank0.substring(4));
      if (r != 0) {
        try {
          seg = ShmSegment.open(Paths.get(rank0.substring(3)), n, s);
        } catch (RuntimeException e) {
          err = e.getMessage();
        }
      }
      byte[][] status = rv.allGather((err == null ? "OK" : "ERR " + err).getBytes(StandardCharsets.UTF_8), o.timeout());
      for (int p = 0; p < n; p++) {
        String st = new String(status[p], StandardCharsets.UTF_8);
        if (st.startsWith("ERR ")) throw new CommException("rank " + p + " could not map the shared-memory segment: " + st.substring(4));
      }
      return new HostCommunicator(r, n, o, seg, watched);
    } catch (RuntimeException e) {
      if (seg != null) seg.close();
      throw e;
    } finally {
      // Every rank has mapped the file (or failed): remove its name so nothing is left behind.
      if (r == 0 && seg != null) seg.unlink();
    }
  }

  @Override public String backendName() { return "host"; }

  @Override protected String checkTensors(Collective kind, Tensor in, Tensor out) {
    if (!(in instanceof HostTensor) || !(out instanceof HostTensor)) {
      return kind.apiName() + ": the host backend needs HostTensor inputs and outputs, got "
          + in.getClass().getSimpleName() + " and " + out.getClass().getSimpleName();
    }
    return null;
  }

  @Override public void abort(String reason) {
    aborted = true;
    if (!isClosed()) seg.abort(rank, reason);
  }

  @Override public boolean isAborted() { return aborted || (!isClosed() && seg.isAborted()); }

  @Override protected void release() {
    seg.markDetached(rank); // peers still waiting for this rank fail now instead of at their timeout
    seg.close();
  }

  // ------------------------------------------------------------------ dispatch

  @Override protected void execute(CollectiveCall c, String problem) {
    if (aborted || seg.isAborted()) {
      aborted = true;
      throw new CommAbortedException("communicator aborted: " + seg.abortReason());
    }
    try {
      // Only a call without a local problem is guaranteed HostTensors; with one, the tensors are unused.
      HostTensor in = c.in() instanceof HostTensor h ? h : null;
      HostTensor out = c.out() instanceof HostTensor h ? h : null;
      boolean lp = c.algorithm() == Algorithm.LP;
      switch (c.kind()) {
        case ALL_REDUCE:
          if (lp) lpAllReduce(c, in, out, problem);
          else if (c.algorithm() == Algorithm.TREE) treeAllReduce(c, in, out, problem);
          else flatAllReduce(c, in, out, problem);
          break;
        case ALL_GATHER:
          if (lp) lpAllGather(c, in, out, problem); else allGather(c, in, out, problem);
          break;
        case REDUCE_SCATTER:
        case ALL_TO_ALL:
          if (lp) lpScatterLike(c, in, out, problem); else scatterLike(c, in, out, problem);
          break;
        case ALL_TO_ALL_V:
          allToAllV(c, in, out, problem);
          break;
        case BROADCAST:
          broadcast(c, in, out, problem);
          break;
        case BARRIER:
          begin(c, problem);
          break;
        default:
          throw new AssertionError(c.kind());
      }
    } catch (CommMismatchException e) {
      throw e; // every rank raised at the same call; the communicator stays usable
    } catch (IllegalArgumentException e) {
      if (problem != null) throw e; // this rank's own arguments, reported to every rank at the first barrier
      abort(c.kind().apiName() + " failed on rank " + rank + ": " + e);
      throw new CommException(c.kind().apiName() + " failed on rank " + rank + ": " + e, e);
    } catch (CommException e) {
      aborted = true;
      throw e;
    } catch (RuntimeException e) {
      abort(c.kind().apiName() + " failed on rank " + rank + ": " + e);
      throw new CommException(c.kind().apiName() + " failed on rank " + rank + ": " + e, e);
    }
  }

  // ------------------------------------------------------------------ call descriptors

  private static final int D_SEQ = 0, D_KIND = 8, D_DTYPE = 12, D_OP = 16, D_ROOT = 20, D_FACTOR = 24,
      D_COUNT = 32, D_ALGO = 40, D_PLEN = 44, D_LAYOUT = 48, D_PTEXT = 56;

  /** D_LAYOUT values: allToAllV's layout (ranks that disagree fail the call); 0 for every other collective. */
  private static final int LAYOUT_NONE = 0, LAYOUT_PACKED = 1, LAYOUT_OFFSETS = 2;

  private static int layout(CollectiveCall c) {
    if (c.kind() != Collective.ALL_TO_ALL_V || c.splits() == null) return LAYOUT_NONE;
    return c.splits().hasOffsets() ? LAYOUT_OFFSETS : LAYOUT_PACKED;
  }

  /**
   * Publishes this call's descriptor, passes the first barrier, and checks that every rank made the
   * same call. Descriptors alternate between two slots by call parity: a rank can only write the
   * slot of call s+2 after the first barrier of call s+1, which every rank enters only after it has
   * finished reading the descriptors of call s.
   */
  private void begin(CollectiveCall c, String problem) {
    long s = ++seq;
    ByteBuffer b = seg.ctrl;
    int d = ShmSegment.descriptor(rank, s);
    b.putLong(d + D_SEQ, s);
    b.putInt(d + D_KIND, c.kind().ordinal());
    b.putInt(d + D_DTYPE, c.dtype().ordinal());
    b.putInt(d + D_OP, c.op() == null ? -1 : c.op().kind().ordinal());
    b.putInt(d + D_ROOT, c.root());
    b.putDouble(d + D_FACTOR, c.op() == null ? 0 : c.op().factor());
    b.putLong(d + D_COUNT, c.count());
    b.putInt(d + D_ALGO, c.algorithm().ordinal());
    b.putInt(d + D_LAYOUT, layout(c));
    byte[] text = problem == null ? new byte[0] : problem.getBytes(StandardCharsets.UTF_8);
    int len = Math.min(text.length, ShmSegment.DESC_BYTES - D_PTEXT);
    for (int i = 0; i < len; i++) b.put(d + D_PTEXT + i, text[i]);
    b.putInt(d + D_PLEN, len);
    String what = c.kind().apiName() + " #" + s;
    signals.barrier(what);
    if (problem != null) throw new IllegalArgumentException(problem);
    for (int p = 0; p < size; p++) {
      int dp = ShmSegment.descriptor(p, s);
      int plen = b.getInt(dp + D_PLEN);
      if (plen > 0) {
        byte[] t = new byte[plen];
        for (int i = 0; i < plen; i++) t[i] = b.get(dp + D_PTEXT + i);
        throw new CommMismatchException(what + ": rank " + p + " rejected its arguments: " + new String(t, StandardCharsets.UTF_8));
      }
    }
    for (int p = 0; p < size; p++) {
      int dp = ShmSegment.descriptor(p, s);
      if (b.getLong(dp + D_SEQ) != s || !sameCall(b, d, dp)) {
        throw new CommMismatchException(what + ": ranks disagree: rank " + rank + " called " + describe(b, d)
            + ", rank " + p + " called " + describe(b, dp));
      }
    }
  }

  private static boolean sameCall(ByteBuffer b, int x, int y) {
    return b.getInt(x + D_KIND) == b.getInt(y + D_KIND) && b.getInt(x + D_DTYPE) == b.getInt(y + D_DTYPE)
        && b.getInt(x + D_OP) == b.getInt(y + D_OP) && b.getInt(x + D_ROOT) == b.getInt(y + D_ROOT)
        && b.getLong(x + D_FACTOR) == b.getLong(y + D_FACTOR) && b.getLong(x + D_COUNT) == b.getLong(y + D_COUNT)
        && b.getInt(x + D_ALGO) == b.getInt(y + D_ALGO) && b.getInt(x + D_LAYOUT) == b.getInt(y + D_LAYOUT);
  }

  private static String describe(ByteBuffer b, int d) {
    int op = b.getInt(d + D_OP);
    return "#" + b.getLong(d + D_SEQ) + " " + Collective.values()[b.getInt(d + D_KIND)].apiName()
        + "(count=" + b.getLong(d + D_COUNT) + ", dtype=" + DataType.values()[b.getInt(d + D_DTYPE)]
        + ", op=" + (op < 0 ? "-" : ReduceOp.Kind.values()[op] + (op == ReduceOp.Kind.PREMUL_SUM.ordinal() ? "(" + b.getDouble(d + D_FACTOR) + ")" : ""))
        + ", root=" + b.getInt(d + D_ROOT) + ", algo=" + Algorithm.values()[b.getInt(d + D_ALGO)]
        + layoutText(b.getInt(d + D_LAYOUT)) + ")";
  }

  private static String layoutText(int layout) {
    switch (layout) {
      case LAYOUT_PACKED: return ", layout=packed";
      case LAYOUT_OFFSETS: return ", layout=offsets";
      case LAYOUT_NONE: return "";
      default: return ", layout=?" + layout;
    }
  }

  /** First barrier of a call (with the descriptor check) or of a later chunk. */
  private void sync(CollectiveCall c, String problem, boolean first) {
    if (first) begin(c, problem);
    else signals.barrier(c.kind().apiName() + " #" + seq);
  }

  private void end(CollectiveCall c) { signals.barrier(c.kind().apiName() + " #" + seq + " (end)"); }

  // ------------------------------------------------------------------ DDA algorithms

  private void flatAllReduce(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    int es = c.dtype().size();
    long count = c.count();
    int kmax = staging / es;
    forEachChunk(count, kmax, (off, k, first) -> {
      if (problem == null) in.copyTo(off, k, inputs[rank], 0);
      sync(c, problem, first);
      reduceInto(c.dtype(), c.op(), inputs, zeroOffsets, k, out, off);
      end(c);
    });
  }

  private void treeAllReduce(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    int es = c.dtype().size();
    long count = c.count();
    int kmax = staging / es;
    int[] offs = new int[size];
    forEachChunk(count, kmax, (off, k, first) -> {
      if (problem == null) in.copyTo(off, k, inputs[rank], 0);
      sync(c, problem, first);
      // reduce-scatter: this rank reduces its slice from every peer into its result area
      int a = slice(k, rank), b = slice(k, rank + 1);
      java.util.Arrays.fill(offs, a * es);
      reducer.reduce(c.dtype(), c.op(), inputs, offs, b - a, results[rank], a * es);
      signals.barrier(c.kind().apiName() + " #" + seq + " (reduce-scatter)");
      // all-gather: slice j from rank j's result area
      for (int j = 0; j < size; j++) {
        int aj = slice(k, j), bj = slice(k, j + 1);
        out.copyFrom(results[j], aj * es, off + aj, bj - aj);
      }
      end(c);
    });
  }

  /** One chunk of a call: elements [off, off + k); {@code first} for the chunk that checks the call. */
  @FunctionalInterface
  private interface Chunk {
    void run(long off, int k, boolean first);
  }

  /**
   * Runs {@code body} over [0, count) in chunks of at most {@code kmax} elements — at least once, so
   * an empty call still passes the first barrier and its descriptor check.
   */
  private static void forEachChunk(long count, int kmax, Chunk body) {
    boolean first = true;
    for (long off = 0; first || off < count; off += kmax, first = false) {
      body.run(off, (int) Math.min(kmax, count - off), first);
    }
  }

  /** Start of slice j of k elements split over the ranks. */
  private int slice(int k, int j) { return (int) ((long) k * j / size); }

  private void allGather(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    int es = c.dtype().size();
    long count = c.count();
    int kmax = staging / es;
    forEachChunk(count, kmax, (off, k, first) -> {
      if (problem == null) in.copyTo(off, k, inputs[rank], 0);
      sync(c, problem, first);
      for (int p = 0; p < size; p++) out.copyFrom(inputs[p], 0, p * count + off, k);
      end(c);
    });
  }

  /** reduceScatter and allToAll: stage one slice per peer, then read ours from everyone. */
  private void scatterLike(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    int es = c.dtype().size();
    long count = c.count();
    int kmax = Math.max(1, staging / (size * es));
    int[] offs = new int[size];
    forEachChunk(count, kmax, (off, k, first) -> {
      if (problem == null) {
        for (int p = 0; p < size; p++) in.copyTo(p * count + off, k, inputs[rank], p * k * es);
      }
      sync(c, problem, first);
      if (c.kind() == Collective.REDUCE_SCATTER) {
        java.util.Arrays.fill(offs, rank * k * es);
        reduceInto(c.dtype(), c.op(), inputs, offs, k, out, off);
      } else {
        for (int p = 0; p < size; p++) out.copyFrom(inputs[p], rank * k * es, p * count + off, k);
      }
      end(c);
    });
  }

  private void broadcast(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    int es = c.dtype().size();
    long count = c.count();
    int kmax = staging / es;
    int root = c.root();
    forEachChunk(count, kmax, (off, k, first) -> {
      if (problem == null && rank == root) in.copyTo(off, k, inputs[rank], 0);
      sync(c, problem, first);
      out.copyFrom(inputs[root], 0, off, k);
      end(c);
    });
  }

  /** Reduces {@code n} elements from {@code srcs} into {@code out} starting at element {@code to}. */
  private void reduceInto(DataType dt, ReduceOp op, ByteBuffer[] srcs, int[] offs, int n, HostTensor out, long to) {
    int es = dt.size();
    int[] o = new int[srcs.length];
    for (int d = 0; d < n; d += HostReducer.BLOCK) {
      int m = Math.min(HostReducer.BLOCK, n - d);
      for (int i = 0; i < o.length; i++) o[i] = offs[i] + d * es;
      reducer.reduce(dt, op, srcs, o, m, scratch, 0);
      out.copyFrom(scratch, 0, to + d, m);
    }
  }

  // ------------------------------------------------------------------ allToAllV

  /*
   * allToAllV over the shared segment.
   *
   * Sizes: before the first barrier every rank writes its sizes into its result area (unused by
   * allToAllV otherwise), as native longs: [0] in.count, [8] out.count, [16..) sendCounts[n], then for
   * the slot layout sendOffsets[n] and recvOffsets[n] (16 + 24n <= 1552 bytes; staging is >= 4 KiB).
   * The descriptor carries the layout, so ranks that disagree on it (or on the dtype) fail in begin().
   * After the first barrier every rank reads every rank's sizes, so all hold the same n x n matrix,
   * check it (validateV: the first violation in one fixed order) and write recvCounts. A violation:
   * one more barrier (so nobody overwrites the sizes a slower peer still reads), then the same
   * CommCapacityException on every rank, with nothing written to out.
   *
   * Data: rank i's stream is its blocks for ranks 0..n-1 concatenated (in the packed layout that is
   * in[0, total_i) itself). Round r stages stream elements [r*K, (r+1)*K) (K = staging / element size)
   * into i's input area; after a barrier every receiver copies the parts of its blocks that lie in
   * that window from every sender's input area; a barrier ends the round. Every rank computes the
   * same round count from the matrix: max_i ceil(total_i / K) (an extra end barrier when it is 0).
   */

  private static final int V_IN = 0, V_OUT = 8, V_COUNTS = 16;

  private void allToAllV(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    Splits sp = c.splits();
    boolean offsets = sp.hasOffsets();
    int n = size;
    if (problem == null) {
      ByteBuffer mine = results[rank];
      mine.putLong(V_IN, in.count());
      mine.putLong(V_OUT, out.count());
      ((HostTensor) sp.sendCounts()).copyTo(0, n, mine, V_COUNTS);
      if (offsets) {
        ((HostTensor) sp.sendOffsets()).copyTo(0, n, mine, V_COUNTS + 8 * n);
        ((HostTensor) sp.recvOffsets()).copyTo(0, n, mine, V_COUNTS + 16 * n);
      }
    }
    begin(c, problem);
    // every rank's sizes; counts[i][j]: rank i sends to rank j
    long[] inCount = new long[n], outCount = new long[n];
    long[][] counts = new long[n][n];
    long[][] sendOff = offsets ? new long[n][n] : null;
    long[][] recvOff = offsets ? new long[n][n] : null;
    for (int p = 0; p < n; p++) {
      ByteBuffer b = results[p];
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
    String violation = validateV(n, inCount, outCount, counts, sendOff, recvOff);
    ByteBuffer rc = ByteBuffer.allocate(8 * n).order(ByteOrder.nativeOrder());
    for (int p = 0; p < n; p++) rc.putLong(8 * p, counts[p][rank]);
    ((HostTensor) sp.recvCounts()).copyFrom(rc, 0, 0, n);
    if (violation != null) {
      end(c); // peers may still read our sizes; the next call overwrites them
      throw new CommCapacityException(c.kind().apiName() + " #" + seq + ": " + violation);
    }

    // where each block starts: in the sender's stream, in its input, and in the receiver's output
    long[][] streamAt = new long[n][n];
    long rounds = 0;
    int es = c.dtype().size();
    int kmax = staging / es;
    for (int i = 0; i < n; i++) {
      long t = 0;
      for (int j = 0; j < n; j++) {
        streamAt[i][j] = t;
        t += counts[i][j];
      }
      rounds = Math.max(rounds, (t + kmax - 1) / kmax);
    }
    long[] recvAt = new long[n]; // for this rank as receiver, by sender
    long at = 0;
    for (int i = 0; i < n; i++) {
      recvAt[i] = offsets ? recvOff[rank][i] : at;
      at += counts[i][rank];
    }
    HostTensor src = in;
    // In place over several rounds, later rounds would read input that earlier ones overwrote: copy the
    // input first. Arrays are compared by identity; two direct buffers may be views of one memory
    // region that Java cannot compare cheaply, so they are copied too (multi-round calls only).
    boolean mayAlias = in == out || (in.array() != null ? in.array() == out.array() : out.array() == null);
    if (rounds > 1 && mayAlias) {
      src = snapshot(in);
    }
    for (long r = 0; r < rounds; r++) {
      long lo = r * kmax, hi = lo + kmax;
      // stage our stream's window [lo, hi)
      for (int j = 0; j < n; j++) {
        long a = Math.max(lo, streamAt[rank][j]), e = Math.min(hi, streamAt[rank][j] + counts[rank][j]);
        if (a >= e) continue;
        long inAt = (offsets ? sendOff[rank][j] : streamAt[rank][j]) + (a - streamAt[rank][j]);
        src.copyTo(inAt, (int) (e - a), inputs[rank], (int) (a - lo) * es);
      }
      signals.barrier(c.kind().apiName() + " #" + seq + " (round " + r + " of " + rounds + ")");
      // our blocks' parts in that window, from every sender
      for (int i = 0; i < n; i++) {
        long a = Math.max(lo, streamAt[i][rank]), e = Math.min(hi, streamAt[i][rank] + counts[i][rank]);
        if (a >= e) continue;
        out.copyFrom(inputs[i], (int) (a - lo) * es, recvAt[i] + (a - streamAt[i][rank]), (int) (e - a));
      }
      end(c);
    }
    if (rounds == 0) end(c);
  }

  /**
   * Checks an allToAllV's global sizes; returns the first violation or null. Order: receivers
   * j = 0..n-1; for each, first its recvOffsets (slot layout; i = 0..n-1: outside [0, out.count],
   * then below recvOffsets[i-1]), then each sender i = 0..n-1: a negative count, the send block
   * outside the sender's input, the block beyond the receiver's output (packed) or slot. Must agree
   * with the test reference (AllToAllVReference), whose messages are the same.
   */
  static String validateV(int n, long[] inCount, long[] outCount, long[][] counts, long[][] sendOff, long[][] recvOff) {
    boolean offsets = sendOff != null;
    long[] sendPrefix = new long[n]; // packed: where sender i's block for the current receiver starts
    for (int j = 0; j < n; j++) {
      long cap = outCount[j];
      if (offsets) {
        for (int i = 0; i < n; i++) {
          long v = recvOff[j][i];
          if (v < 0 || v > cap) {
            return "receiver rank " + j + ": recvOffsets[" + i + "] = " + v + " lies outside its output of " + cap + " elements";
          }
          if (i > 0 && v < recvOff[j][i - 1]) {
            return "receiver rank " + j + ": recvOffsets[" + i + "] = " + v + " is below recvOffsets[" + (i - 1) + "] = "
                + recvOff[j][i - 1] + " (receive offsets must be non-decreasing)";
          }
        }
      }
      long recvPrefix = 0;
      for (int i = 0; i < n; i++) {
        long k = counts[i][j];
        if (k < 0) return "sender rank " + i + " sends a negative count " + k + " to receiver rank " + j;
        long o = offsets ? sendOff[i][j] : sendPrefix[i];
        if (o < 0 || o > inCount[i] || k > inCount[i] - o) {
          return "sender rank " + i + ": its block of " + k + " elements for receiver rank " + j + " at input offset " + o
              + " runs outside its input of " + inCount[i] + " elements";
        }
        if (offsets) {
          long at = recvOff[j][i];
          long slot = (i + 1 < n ? recvOff[j][i + 1] : cap) - at;
          if (k > slot) {
            return "receiver rank " + j + " cannot hold the " + k + " elements from sender rank " + i
                + ": its slot for rank " + i + " at output offset " + at + " holds " + slot + " elements";
          }
        } else if (k > cap - recvPrefix) {
          return "receiver rank " + j + " cannot hold the " + k + " elements from sender rank " + i
              + " at output offset " + recvPrefix + ": its output holds " + cap + " elements";
        }
        sendPrefix[i] += k;
        recvPrefix += k;
      }
    }
    return null;
  }

  /** A private copy of an array tensor (for an in-place allToAllV). */
  private static HostTensor snapshot(HostTensor t) {
    Object a = t.array();
    if (a == null) {
      // same direct-buffer tensor as input and output: copy through a heap array of the element type
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

  // ------------------------------------------------------------------ FP8 (LP) algorithms

  private void ensureFloatScratch(int n) {
    if (fa.length < n) {
      fa = new float[n];
      fb = new float[n];
    }
  }

  private void readFloats(HostTensor t, long from, int n, float[] dst) {
    DataType dt = t.dtype();
    for (int d = 0; d < n; d += HostReducer.BLOCK) {
      int m = Math.min(HostReducer.BLOCK, n - d);
      t.copyTo(from + d, m, scratch, 0);
      reducer.toFloats(dt, scratch, 0, m, dst, d);
    }
  }

  private void writeFloats(float[] src, int n, HostTensor t, long to) {
    DataType dt = t.dtype();
    for (int d = 0; d < n; d += HostReducer.BLOCK) {
      int m = Math.min(HostReducer.BLOCK, n - d);
      reducer.fromFloats(dt, src, d, m, scratch, 0);
      t.copyFrom(scratch, 0, to + d, m);
    }
  }

  /** Block-aligned start of slice j of k elements, so each slice is whole quantization blocks. */
  private int lpSlice(int k, int j) {
    int bs = quantizer.blockSize();
    long blocks = (k + (long) bs - 1) / bs;
    return (int) Math.min(k, blocks * j / size * bs);
  }

  /** Bytes of the n slice runs of a k-element chunk, and their offsets (out[j]). */
  private int lpRunOffsets(int k, int[] out) {
    int total = 0;
    for (int j = 0; j < size; j++) {
      out[j] = total;
      total += BlockQuantizer.encodedBytes(lpSlice(k, j + 1) - lpSlice(k, j), quantizer.blockSize());
    }
    return total;
  }

  /**
   * Largest chunk whose {@code runs} equal runs of k elements each fit the staging area, in whole
   * blocks (where one fits), so chunks keep the block boundaries of a single run.
   */
  private int lpChunk(int runs) {
    int bs = quantizer.blockSize();
    long k = (long) (staging / runs - 8) * bs / (bs + 4);
    k = Math.max(1, k);
    while (k > 1 && (long) runs * BlockQuantizer.encodedBytes((int) k, bs) > staging) k--;
    if (k >= bs) k -= k % bs;
    return (int) k;
  }

  /**
   * LP allReduce: one-shot up to {@link CommOptions#lpOneShotMaxRanks()} ranks (default 2), else
   * two-shot. One-shot: each rank quantizes its whole chunk once, then every rank dequantizes every
   * rank's run and sums them in FP32 in rank order — one quantization per element, and at 2 ranks
   * the same bytes read as the two-shot. Two-shot: each rank reduces its slice from every rank and
   * requantizes it, then every rank dequantizes every slice — two quantizations.
   */
  private void lpAllReduce(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    if (size <= options().lpOneShotMaxRanks()) {
      lpOneShotAllReduce(c, in, out, problem);
      return;
    }
    long count = c.count();
    int[] runOff = new int[size];
    int kmax = lpChunk(1);
    while (kmax > 1 && lpRunOffsets(kmax, runOff) > staging) kmax -= Math.max(1, kmax / 64);
    ensureFloatScratch((int) Math.min(kmax, Math.max(count, 1)));
    forEachChunk(count, kmax, (off, k, first) -> {
      lpRunOffsets(k, runOff);
      if (problem == null) {
        readFloats(in, off, k, fa);
        for (int j = 0; j < size; j++) {
          int a = lpSlice(k, j);
          quantizer.quantize(fa, a, lpSlice(k, j + 1) - a, inputs[rank], runOff[j]);
        }
      }
      sync(c, problem, first);
      // stage 1: dequantize slice `rank` from every peer, FP32 sum in rank order, requantize once
      int len = lpSlice(k, rank + 1) - lpSlice(k, rank);
      for (int p = 0; p < size; p++) {
        quantizer.dequantize(inputs[p], runOff[rank], len, p == 0 ? fa : fb, 0);
        if (p > 0) for (int i = 0; i < len; i++) fa[i] += fb[i];
      }
      if (c.op().kind() == ReduceOp.Kind.AVG) for (int i = 0; i < len; i++) fa[i] = fa[i] / size;
      quantizer.quantize(fa, 0, len, results[rank], 0);
      signals.barrier(c.kind().apiName() + " #" + seq + " (LP reduce-scatter)");
      // stage 2: every slice from its owner's result area, dequantized
      for (int j = 0; j < size; j++) {
        int a = lpSlice(k, j), lj = lpSlice(k, j + 1) - a;
        quantizer.dequantize(results[j], 0, lj, fb, 0);
        writeFloats(fb, lj, out, off + a);
      }
      end(c);
    });
  }

  private void lpOneShotAllReduce(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    lpWholeChunks(c, in, problem, (off, k, first) -> {
      for (int p = 0; p < size; p++) {
        quantizer.dequantize(inputs[p], 0, k, p == 0 ? fa : fb, 0);
        if (p > 0) for (int i = 0; i < k; i++) fa[i] += fb[i];
      }
      if (c.op().kind() == ReduceOp.Kind.AVG) for (int i = 0; i < k; i++) fa[i] = fa[i] / size;
      writeFloats(fa, k, out, off);
    });
  }

  private void lpAllGather(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    long count = c.count();
    lpWholeChunks(c, in, problem, (off, k, first) -> {
      for (int p = 0; p < size; p++) {
        quantizer.dequantize(inputs[p], 0, k, fb, 0);
        writeFloats(fb, k, out, p * count + off);
      }
    });
  }

  /**
   * The LP collectives in which every rank quantizes its chunk whole, once: per chunk, this rank's
   * [off, off + k) is quantized into its input area and the ranks sync; {@code body} then reads every
   * rank's run (inputs[p]); the chunk ends with {@link #end}.
   */
  private void lpWholeChunks(CollectiveCall c, HostTensor in, String problem, Chunk body) {
    long count = c.count();
    int kmax = lpChunk(1);
    ensureFloatScratch((int) Math.min(kmax, Math.max(count, 1)));
    forEachChunk(count, kmax, (off, k, first) -> {
      if (problem == null) {
        readFloats(in, off, k, fa);
        quantizer.quantize(fa, 0, k, inputs[rank], 0);
      }
      sync(c, problem, first);
      body.run(off, k, first);
      end(c);
    });
  }

  /** LP reduceScatter (dequantize + FP32 sum) and allToAll (dequantize): one quantization. */
  private void lpScatterLike(CollectiveCall c, HostTensor in, HostTensor out, String problem) {
    long count = c.count();
    int kmax = lpChunk(size);
    ensureFloatScratch((int) Math.min(kmax, Math.max(count, 1)));
    forEachChunk(count, kmax, (off, k, first) -> {
      int run = BlockQuantizer.encodedBytes(k, quantizer.blockSize());
      if (problem == null) {
        for (int p = 0; p < size; p++) {
          readFloats(in, p * count + off, k, fa);
          quantizer.quantize(fa, 0, k, inputs[rank], p * run);
        }
      }
      sync(c, problem, first);
      if (c.kind() == Collective.REDUCE_SCATTER) {
        for (int p = 0; p < size; p++) {
          quantizer.dequantize(inputs[p], rank * run, k, p == 0 ? fa : fb, 0);
          if (p > 0) for (int i = 0; i < k; i++) fa[i] += fb[i];
        }
        if (c.op().kind() == ReduceOp.Kind.AVG) for (int i = 0; i < k; i++) fa[i] = fa[i] / size;
        writeFloats(fa, k, out, off);
      } else {
        for (int p = 0; p < size; p++) {
          quantizer.dequantize(inputs[p], rank * run, k, fb, 0);
          writeFloats(fb, k, out, p * count + off);
        }
      }
      end(c);
    });
  }
}
