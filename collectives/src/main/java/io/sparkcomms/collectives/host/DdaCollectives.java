package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * The full-precision host algorithms (direct access to every rank's areas): the flat one-shot and
 * tree two-shot allReduce, allGather, reduceScatter, allToAll, broadcast, the rooted reduce, gather
 * and scatter, and the per-rank-count allGatherV and reduceScatterV. Each chunk: stage this
 * rank's part into its input area, sync, read the peers' areas, end barrier; a call that fits half
 * an input area has one chunk and no end barrier ({@link ShmContext#run}). A call with a local
 * problem ({@link HostCall#problem()}) stages nothing and raises at the first sync.
 */
final class DdaCollectives {
  private final ShmContext x;
  private final HostReducer reducer;
  private final int[] zeroOffsets;
  private final ByteBuffer scratch = ByteBuffer.allocateDirect(HostReducer.BLOCK * 8).order(ByteOrder.nativeOrder());

  DdaCollectives(ShmContext x, HostReducer reducer) {
    this.x = x;
    this.reducer = reducer;
    this.zeroOffsets = new int[x.size];
  }

  void flatAllReduce(HostCall c) {
    x.run(c, c.count(), c.dtype().size(), (off, k, a) -> stageOwn(c, off, k, a),
        (off, k, a) -> reduceInto(c.dtype(), c.op(), a, zeroOffsets, k, c.out(), off));
  }

  /** Stages this rank's input elements [off, off + k) at the start of its area. */
  private void stageOwn(HostCall c, long off, int k, ByteBuffer[] a) { c.in().copyTo(off, k, a[x.rank], 0); }

  void treeAllReduce(HostCall c) {
    int es = c.dtype().size();
    int[] offs = new int[x.size];
    x.forEachChunk(c, c.count(), x.staging / es, (off, k, first) -> {
      if (c.problem() == null) c.in().copyTo(off, k, x.inputs[x.rank], 0);
      x.sync(c, first);
      // reduce-scatter: this rank reduces its slice from every peer into its result area
      int a = slice(k, x.rank), b = slice(k, x.rank + 1);
      Arrays.fill(offs, a * es);
      reducer.reduce(c.dtype(), c.op(), x.inputs, offs, b - a, x.results[x.rank], a * es);
      x.barrier(c, "reduce-scatter");
      // all-gather: slice j from rank j's result area
      for (int j = 0; j < x.size; j++) {
        int aj = slice(k, j), bj = slice(k, j + 1);
        c.out().copyFrom(x.results[j], aj * es, off + aj, bj - aj);
      }
      x.end(c);
    });
  }

  /** Start of slice j of k elements split over the ranks. */
  private int slice(int k, int j) { return (int) ((long) k * j / x.size); }

  void allGather(HostCall c) {
    long count = c.count();
    x.run(c, count, c.dtype().size(), (off, k, a) -> stageOwn(c, off, k, a), (off, k, a) -> {
      for (int p = 0; p < x.size; p++) c.out().copyFrom(a[p], 0, p * count + off, k);
    });
  }

  /** reduceScatter and allToAll: stage one slice per peer, then read ours from everyone. */
  void scatterLike(HostCall c) {
    int es = c.dtype().size();
    long count = c.count();
    int n = x.size;
    int[] offs = new int[n];
    x.forEachChunk(c, count, Math.max(1, x.staging / (n * es)), (off, k, first) -> {
      if (c.problem() == null) {
        for (int p = 0; p < n; p++) c.in().copyTo(p * count + off, k, x.inputs[x.rank], p * k * es);
      }
      x.sync(c, first);
      if (c.kind() == Collective.REDUCE_SCATTER) {
        Arrays.fill(offs, x.rank * k * es);
        reduceInto(c.dtype(), c.op(), x.inputs, offs, k, c.out(), off);
      } else {
        for (int p = 0; p < n; p++) c.out().copyFrom(x.inputs[p], x.rank * k * es, p * count + off, k);
      }
      x.end(c);
    });
  }

  void broadcast(HostCall c) {
    int root = c.root();
    x.run(c, c.count(), c.dtype().size(), (off, k, a) -> {
      if (x.rank == root) stageOwn(c, off, k, a);
    }, (off, k, a) -> c.out().copyFrom(a[root], 0, off, k));
  }

  /** reduce: every rank stages its chunk; the root reduces them all into its output. */
  void reduce(HostCall c) {
    boolean root = x.rank == c.root();
    x.run(c, c.count(), c.dtype().size(), (off, k, a) -> stageOwn(c, off, k, a), (off, k, a) -> {
      if (root) reduceInto(c.dtype(), c.op(), a, zeroOffsets, k, c.out(), off);
    });
  }

  /** gather: every rank stages its chunk; the root copies rank p's to element p*count + off. */
  void gather(HostCall c) {
    long count = c.count();
    boolean root = x.rank == c.root();
    x.run(c, count, c.dtype().size(), (off, k, a) -> stageOwn(c, off, k, a), (off, k, a) -> {
      if (root) for (int p = 0; p < x.size; p++) c.out().copyFrom(a[p], 0, p * count + off, k);
    });
  }

  /** scatter: the root stages one slice per rank; each rank reads its own from the root's area. */
  void scatter(HostCall c) {
    int es = c.dtype().size();
    long count = c.count();
    int n = x.size, root = c.root();
    x.forEachChunk(c, count, Math.max(1, x.staging / (n * es)), (off, k, first) -> {
      if (c.problem() == null && x.rank == root) {
        for (int p = 0; p < n; p++) c.in().copyTo(p * count + off, k, x.inputs[x.rank], p * k * es);
      }
      x.sync(c, first);
      c.out().copyFrom(x.inputs[root], x.rank * k * es, off, k);
      x.end(c);
    });
  }

  /**
   * allGatherV: chunks run over the largest count (the same on every rank: the counts were compared
   * at the first sync); in each, a rank stages what is left of its block, at most the chunk.
   */
  void allGatherV(HostCall c) {
    PerRankCounts pc = c.plan().counts();  // null only with a local problem, which raises at the first sync
    x.forEachChunk(c, pc == null ? 0 : pc.max(), x.staging / c.dtype().size(), (off, k, first) -> {
      if (c.problem() == null) {
        int mine = part(pc.count(x.rank), off, k);
        if (mine > 0) c.in().copyTo(off, mine, x.inputs[x.rank], 0);
      }
      x.sync(c, first);
      for (int p = 0; p < x.size; p++) {
        int kp = part(pc.count(p), off, k);
        if (kp > 0) c.out().copyFrom(x.inputs[p], 0, pc.start(p) + off, kp);
      }
      x.end(c);
    });
  }

  /** reduceScatterV: as reduceScatter, one slot of the chunk size per rank, each filled with what is left of that rank's block. */
  void reduceScatterV(HostCall c) {
    int es = c.dtype().size();
    int n = x.size;
    int[] offs = new int[n];
    PerRankCounts pc = c.plan().counts();
    x.forEachChunk(c, pc == null ? 0 : pc.max(), Math.max(1, x.staging / (n * es)), (off, k, first) -> {
      if (c.problem() == null) {
        for (int p = 0; p < n; p++) {
          int kp = part(pc.count(p), off, k);
          if (kp > 0) c.in().copyTo(pc.start(p) + off, kp, x.inputs[x.rank], p * k * es);
        }
      }
      x.sync(c, first);
      int mine = part(pc.count(x.rank), off, k);
      if (mine > 0) {
        Arrays.fill(offs, x.rank * k * es);
        reduceInto(c.dtype(), c.op(), x.inputs, offs, mine, c.out(), off);
      }
      x.end(c);
    });
  }

  /** Elements of a block of {@code count} in the chunk [off, off + k): 0..k. */
  private static int part(long count, long off, int k) { return (int) Math.max(0, Math.min(k, count - off)); }

  /** A barrier: the first sync (with the descriptor check) and nothing else. */
  void barrier(HostCall c) { x.begin(c); }

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
}
