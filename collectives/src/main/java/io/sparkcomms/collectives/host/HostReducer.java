package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HalfFloats;
import io.sparkcomms.collectives.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Element-wise reduction over the ranks' staging areas, the host twin of the DDA kernels' inner loop:
 * accumulate in FP32 for FP32/BF16/FP16 (FP64 for FP64, 64-bit integers for INT32/INT64), combine in
 * fixed rank order 0..n-1 so every rank computes bit-identical results, round once at the end.
 * Works in blocks of {@link #BLOCK} elements to stay in cache. One instance per communicator (it owns
 * scratch arrays); not thread-safe.
 */
final class HostReducer {
  static final int BLOCK = 16 * 1024;
  private final float[] facc = new float[BLOCK];
  private final float[] ftmp = new float[BLOCK];
  private final double[] dacc = new double[BLOCK];
  private final double[] dtmp = new double[BLOCK];
  private final long[] lacc = new long[BLOCK];
  private final long[] ltmp = new long[BLOCK];
  private final short[] stmp = new short[BLOCK];
  private final int[] itmp = new int[BLOCK];

  /**
   * Reduces {@code count} elements: source i is {@code srcs[i]} at byte offset {@code srcOffs[i]};
   * the result (in {@code dt}) goes to {@code dst} at byte offset {@code dstOff}.
   */
  void reduce(DataType dt, ReduceOp op, ByteBuffer[] srcs, int[] srcOffs, int count, ByteBuffer dst, int dstOff) {
    int es = dt.size();
    for (int done = 0; done < count; done += BLOCK) {
      int n = Math.min(BLOCK, count - done);
      int[] offs = new int[srcs.length];
      for (int i = 0; i < srcs.length; i++) offs[i] = srcOffs[i] + done * es;
      reduceBlock(dt, op, srcs, offs, n, dst, dstOff + done * es);
    }
  }

  private void reduceBlock(DataType dt, ReduceOp op, ByteBuffer[] srcs, int[] offs, int n, ByteBuffer dst, int dstOff) {
    int ranks = srcs.length;
    switch (dt) {
      case FLOAT32:
      case BFLOAT16:
      case FLOAT16: {
        float f = (float) op.factor();
        loadFloats(dt, srcs[0], offs[0], n, facc);
        if (op.kind() == ReduceOp.Kind.PREMUL_SUM) for (int j = 0; j < n; j++) facc[j] = f * facc[j];
        for (int i = 1; i < ranks; i++) {
          loadFloats(dt, srcs[i], offs[i], n, ftmp);
          combine(op, f, facc, ftmp, n);
        }
        if (op.kind() == ReduceOp.Kind.AVG) for (int j = 0; j < n; j++) facc[j] = facc[j] / ranks;
        storeFloats(dt, facc, n, dst, dstOff);
        break;
      }
      case FLOAT64: {
        double f = op.factor();
        view(srcs[0], offs[0]).asDoubleBuffer().get(dacc, 0, n);
        if (op.kind() == ReduceOp.Kind.PREMUL_SUM) for (int j = 0; j < n; j++) dacc[j] = f * dacc[j];
        for (int i = 1; i < ranks; i++) {
          view(srcs[i], offs[i]).asDoubleBuffer().get(dtmp, 0, n);
          combine(op, f, dacc, dtmp, n);
        }
        if (op.kind() == ReduceOp.Kind.AVG) for (int j = 0; j < n; j++) dacc[j] = dacc[j] / ranks;
        view(dst, dstOff).asDoubleBuffer().put(dacc, 0, n);
        break;
      }
      case INT32:
      case INT64: {
        loadLongs(dt, srcs[0], offs[0], n, lacc);
        for (int i = 1; i < ranks; i++) {
          loadLongs(dt, srcs[i], offs[i], n, ltmp);
          combine(op, lacc, ltmp, n);
        }
        if (op.kind() == ReduceOp.Kind.AVG) for (int j = 0; j < n; j++) lacc[j] = lacc[j] / ranks;
        storeLongs(dt, lacc, n, dst, dstOff);
        break;
      }
      default:
        throw new AssertionError(dt);
    }
  }

  private static ByteBuffer view(ByteBuffer b, int off) {
    ByteBuffer d = b.duplicate().order(ByteOrder.nativeOrder());
    d.position(off);
    return d;
  }

  private void loadFloats(DataType dt, ByteBuffer b, int off, int n, float[] out) {
    if (dt == DataType.FLOAT32) {
      view(b, off).asFloatBuffer().get(out, 0, n);
      return;
    }
    view(b, off).asShortBuffer().get(stmp, 0, n);
    if (dt == DataType.BFLOAT16) for (int j = 0; j < n; j++) out[j] = HalfFloats.bf16ToFloat(stmp[j]);
    else for (int j = 0; j < n; j++) out[j] = HalfFloats.fp16ToFloat(stmp[j]);
  }

  private void storeFloats(DataType dt, float[] in, int n, ByteBuffer b, int off) {
    if (dt == DataType.FLOAT32) {
      view(b, off).asFloatBuffer().put(in, 0, n);
      return;
    }
    if (dt == DataType.BFLOAT16) for (int j = 0; j < n; j++) stmp[j] = HalfFloats.floatToBf16(in[j]);
    else for (int j = 0; j < n; j++) stmp[j] = HalfFloats.floatToFp16(in[j]);
    view(b, off).asShortBuffer().put(stmp, 0, n);
  }

  private void loadLongs(DataType dt, ByteBuffer b, int off, int n, long[] out) {
    if (dt == DataType.INT64) {
      view(b, off).asLongBuffer().get(out, 0, n);
      return;
    }
    view(b, off).asIntBuffer().get(itmp, 0, n);
    for (int j = 0; j < n; j++) out[j] = itmp[j];
  }

  private void storeLongs(DataType dt, long[] in, int n, ByteBuffer b, int off) {
    if (dt == DataType.INT64) {
      view(b, off).asLongBuffer().put(in, 0, n);
      return;
    }
    for (int j = 0; j < n; j++) itmp[j] = (int) in[j]; // two's-complement wrap, as NCCL
    view(b, off).asIntBuffer().put(itmp, 0, n);
  }

  private static void combine(ReduceOp op, float f, float[] acc, float[] x, int n) {
    switch (op.kind()) {
      case SUM: case AVG: for (int j = 0; j < n; j++) acc[j] += x[j]; break;
      case PREMUL_SUM: for (int j = 0; j < n; j++) acc[j] += f * x[j]; break;
      case PRODUCT: for (int j = 0; j < n; j++) acc[j] *= x[j]; break;
      case MIN: for (int j = 0; j < n; j++) acc[j] = Math.min(acc[j], x[j]); break;
      case MAX: for (int j = 0; j < n; j++) acc[j] = Math.max(acc[j], x[j]); break;
      default: throw new AssertionError(op);
    }
  }

  private static void combine(ReduceOp op, double f, double[] acc, double[] x, int n) {
    switch (op.kind()) {
      case SUM: case AVG: for (int j = 0; j < n; j++) acc[j] += x[j]; break;
      case PREMUL_SUM: for (int j = 0; j < n; j++) acc[j] += f * x[j]; break;
      case PRODUCT: for (int j = 0; j < n; j++) acc[j] *= x[j]; break;
      case MIN: for (int j = 0; j < n; j++) acc[j] = Math.min(acc[j], x[j]); break;
      case MAX: for (int j = 0; j < n; j++) acc[j] = Math.max(acc[j], x[j]); break;
      default: throw new AssertionError(op);
    }
  }

  private static void combine(ReduceOp op, long[] acc, long[] x, int n) {
    switch (op.kind()) {
      case SUM: case AVG: for (int j = 0; j < n; j++) acc[j] += x[j]; break;
      case PRODUCT: for (int j = 0; j < n; j++) acc[j] *= x[j]; break;
      case MIN: for (int j = 0; j < n; j++) acc[j] = Math.min(acc[j], x[j]); break;
      case MAX: for (int j = 0; j < n; j++) acc[j] = Math.max(acc[j], x[j]); break;
      default: throw new AssertionError(op); // PREMUL_SUM is rejected for integers before this point
    }
  }

  // ------------------------------------------------------------------ FP32 views for the LP path

  /** Reads {@code n} FLOAT32 or BFLOAT16 elements at {@code off} as floats. */
  void toFloats(DataType dt, ByteBuffer b, int off, int n, float[] out, int outOff) {
    for (int done = 0; done < n; done += BLOCK) {
      int m = Math.min(BLOCK, n - done);
      loadFloats(dt, b, off + done * dt.size(), m, ftmp);
      System.arraycopy(ftmp, 0, out, outOff + done, m);
    }
  }

  /** Writes {@code n} floats as FLOAT32 or BFLOAT16 (rounded to nearest even) at {@code off}. */
  void fromFloats(DataType dt, float[] in, int inOff, int n, ByteBuffer b, int off) {
    for (int done = 0; done < n; done += BLOCK) {
      int m = Math.min(BLOCK, n - done);
      System.arraycopy(in, inOff + done, ftmp, 0, m);
      storeFloats(dt, ftmp, m, b, off + done * dt.size());
    }
  }
}
