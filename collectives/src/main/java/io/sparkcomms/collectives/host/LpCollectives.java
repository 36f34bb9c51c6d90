package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.lp.BlockQuantizer;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The FP8 (LP) host algorithms: every rank quantizes into its input area with {@link BlockQuantizer}
 * (the reference codec), peers dequantize and accumulate in FP32 in rank order, so every rank
 * computes identical bits. allGather, allToAll and reduceScatter quantize once; allReduce is
 * one-shot (one quantization) up to {@code oneShotMaxRanks} ranks, two-shot (two) above.
 */
final class LpCollectives {
  private final ShmContext x;
  private final HostReducer reducer;
  private final BlockQuantizer quantizer;
  private final int oneShotMaxRanks;
  private final ByteBuffer scratch = ByteBuffer.allocateDirect(HostReducer.BLOCK * 8).order(ByteOrder.nativeOrder());
  private float[] fa = new float[0];
  private float[] fb = new float[0];

  LpCollectives(ShmContext x, HostReducer reducer, BlockQuantizer quantizer, int oneShotMaxRanks) {
    this.x = x;
    this.reducer = reducer;
    this.quantizer = quantizer;
    this.oneShotMaxRanks = oneShotMaxRanks;
  }

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
    return (int) Math.min(k, blocks * j / x.size * bs);
  }

  /** Bytes of the n slice runs of a k-element chunk, and their offsets (out[j]). */
  private int lpRunOffsets(int k, int[] out) {
    int total = 0;
    for (int j = 0; j < x.size; j++) {
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
    long k = (long) (x.staging / runs - 8) * bs / (bs + 4);
    k = Math.max(1, k);
    while (k > 1 && (long) runs * BlockQuantizer.encodedBytes((int) k, bs) > x.staging) k--;
    if (k >= bs) k -= k % bs;
    return (int) k;
  }

  /**
   * LP allReduce: one-shot up to {@code oneShotMaxRanks} ranks, else two-shot. One-shot: each rank
   * quantizes its whole chunk once, then every rank dequantizes every rank's run and sums them in
   * FP32 in rank order — one quantization per element, and at 2 ranks the same bytes read as the
   * two-shot. Two-shot: each rank reduces its slice from every rank and requantizes it, then every
   * rank dequantizes every slice — two quantizations.
   */
  void allReduce(HostCall c) {
    if (x.size <= oneShotMaxRanks) {
      oneShotAllReduce(c);
      return;
    }
    long count = c.count();
    int n = x.size;
    int[] runOff = new int[n];
    int kmax = lpChunk(1);
    while (kmax > 1 && lpRunOffsets(kmax, runOff) > x.staging) kmax -= Math.max(1, kmax / 64);
    ensureFloatScratch((int) Math.min(kmax, Math.max(count, 1)));
    x.forEachChunk(c, count, kmax, (off, k, first) -> {
      lpRunOffsets(k, runOff);
      if (c.problem() == null) {
        readFloats(c.in(), off, k, fa);
        for (int j = 0; j < n; j++) {
          int a = lpSlice(k, j);
          quantizer.quantize(fa, a, lpSlice(k, j + 1) - a, x.inputs[x.rank], runOff[j]);
        }
      }
      x.sync(c, first);
      // stage 1: dequantize slice `rank` from every peer, FP32 sum in rank order, requantize once
      int len = lpSlice(k, x.rank + 1) - lpSlice(k, x.rank);
      for (int p = 0; p < n; p++) {
        quantizer.dequantize(x.inputs[p], runOff[x.rank], len, p == 0 ? fa : fb, 0);
        if (p > 0) for (int i = 0; i < len; i++) fa[i] += fb[i];
      }
      if (c.op().kind() == ReduceOp.Kind.AVG) for (int i = 0; i < len; i++) fa[i] = fa[i] / n;
      quantizer.quantize(fa, 0, len, x.results[x.rank], 0);
      x.barrier(c, "LP reduce-scatter");
      // stage 2: every slice from its owner's result area, dequantized
      for (int j = 0; j < n; j++) {
        int a = lpSlice(k, j), lj = lpSlice(k, j + 1) - a;
        quantizer.dequantize(x.results[j], 0, lj, fb, 0);
        writeFloats(fb, lj, c.out(), off + a);
      }
      x.end(c);
    });
  }

  private void oneShotAllReduce(HostCall c) {
    wholeChunks(c, (off, k, first) -> {
      for (int p = 0; p < x.size; p++) {
        quantizer.dequantize(x.inputs[p], 0, k, p == 0 ? fa : fb, 0);
        if (p > 0) for (int i = 0; i < k; i++) fa[i] += fb[i];
      }
      if (c.op().kind() == ReduceOp.Kind.AVG) for (int i = 0; i < k; i++) fa[i] = fa[i] / x.size;
      writeFloats(fa, k, c.out(), off);
    });
  }

  void allGather(HostCall c) {
    long count = c.count();
    wholeChunks(c, (off, k, first) -> {
      for (int p = 0; p < x.size; p++) {
        quantizer.dequantize(x.inputs[p], 0, k, fb, 0);
        writeFloats(fb, k, c.out(), p * count + off);
      }
    });
  }

  /**
   * The LP collectives in which every rank quantizes its chunk whole, once: per chunk, this rank's
   * [off, off + k) is quantized into its input area and the ranks sync; {@code body} then reads every
   * rank's run (inputs[p]); the chunk ends with the end barrier.
   */
  private void wholeChunks(HostCall c, ShmContext.Chunk body) {
    long count = c.count();
    int kmax = lpChunk(1);
    ensureFloatScratch((int) Math.min(kmax, Math.max(count, 1)));
    x.forEachChunk(c, count, kmax, (off, k, first) -> {
      if (c.problem() == null) {
        readFloats(c.in(), off, k, fa);
        quantizer.quantize(fa, 0, k, x.inputs[x.rank], 0);
      }
      x.sync(c, first);
      body.run(off, k, first);
      x.end(c);
    });
  }

  /** LP reduceScatter (dequantize + FP32 sum) and allToAll (dequantize): one quantization. */
  void scatterLike(HostCall c) {
    long count = c.count();
    int n = x.size;
    int kmax = lpChunk(n);
    ensureFloatScratch((int) Math.min(kmax, Math.max(count, 1)));
    x.forEachChunk(c, count, kmax, (off, k, first) -> {
      int run = BlockQuantizer.encodedBytes(k, quantizer.blockSize());
      if (c.problem() == null) {
        for (int p = 0; p < n; p++) {
          readFloats(c.in(), p * count + off, k, fa);
          quantizer.quantize(fa, 0, k, x.inputs[x.rank], p * run);
        }
      }
      x.sync(c, first);
      if (c.kind() == Collective.REDUCE_SCATTER) {
        for (int p = 0; p < n; p++) {
          quantizer.dequantize(x.inputs[p], x.rank * run, k, p == 0 ? fa : fb, 0);
          if (p > 0) for (int i = 0; i < k; i++) fa[i] += fb[i];
        }
        if (c.op().kind() == ReduceOp.Kind.AVG) for (int i = 0; i < k; i++) fa[i] = fa[i] / n;
        writeFloats(fa, k, c.out(), off);
      } else {
        for (int p = 0; p < n; p++) {
          quantizer.dequantize(x.inputs[p], x.rank * run, k, fb, 0);
          writeFloats(fb, k, c.out(), p * count + off);
        }
      }
      x.end(c);
    });
  }
}
