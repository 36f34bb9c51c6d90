package io.sparkcomms.collectives;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;

/**
 * A tensor over a Java array or a direct {@link ByteBuffer}. It never owns memory: the caller's array or
 * buffer is read and written in place. BFLOAT16 and FLOAT16 elements are {@code short} bit patterns.
 * Direct buffers are read in native byte order from their position, {@code count} elements long.
 */
public final class HostTensor implements Tensor {
  private final DataType dtype;
  private final Object array;     // float[] double[] int[] long[] short[], or null
  private final ByteBuffer buffer;  // native-order view starting at element 0, or null
  private final int count;

  private HostTensor(DataType dtype, Object array, ByteBuffer buffer, int count) {
    this.dtype = dtype;
    this.array = array;
    this.buffer = buffer;
    this.count = count;
  }

  public static HostTensor of(float[] a) { return new HostTensor(DataType.FLOAT32, Objects.requireNonNull(a, "array"), null, a.length); }
  public static HostTensor of(double[] a) { return new HostTensor(DataType.FLOAT64, Objects.requireNonNull(a, "array"), null, a.length); }
  public static HostTensor of(int[] a) { return new HostTensor(DataType.INT32, Objects.requireNonNull(a, "array"), null, a.length); }
  public static HostTensor of(long[] a) { return new HostTensor(DataType.INT64, Objects.requireNonNull(a, "array"), null, a.length); }
  /** bfloat16 elements as raw bits. */
  public static HostTensor bf16(short[] bits) { return new HostTensor(DataType.BFLOAT16, Objects.requireNonNull(bits, "array"), null, bits.length); }
  /** IEEE half elements as raw bits. */
  public static HostTensor fp16(short[] bits) { return new HostTensor(DataType.FLOAT16, Objects.requireNonNull(bits, "array"), null, bits.length); }

  /** Views {@code buf} from its position: {@code remaining / dtype.size()} elements. Must be direct. */
  public static HostTensor wrap(ByteBuffer buf, DataType dtype) {
    Objects.requireNonNull(buf, "buffer");
    if (!buf.isDirect()) {
      throw new IllegalArgumentException("HostTensor.wrap needs a direct ByteBuffer (use an array instead)");
    }
    ByteBuffer view = buf.slice().order(ByteOrder.nativeOrder());
    return new HostTensor(dtype, null, view, view.remaining() / dtype.size());
  }

  /** A new zeroed tensor backed by an array of the dtype's Java type. */
  public static HostTensor allocate(DataType dtype, int count) {
    switch (dtype) {
      case FLOAT32: return of(new float[count]);
      case FLOAT64: return of(new double[count]);
      case INT32: return of(new int[count]);
      case INT64: return of(new long[count]);
      case BFLOAT16: return bf16(new short[count]);
      case FLOAT16: return fp16(new short[count]);
      default: throw new AssertionError(dtype);
    }
  }

  @Override public DataType dtype() { return dtype; }
  @Override public long count() { return count; }
  @Override public boolean isDevice() { return false; }

  /** False for a tensor over a read-only buffer: it cannot be a collective's output. */
  public boolean isWritable() { return buffer == null || !buffer.isReadOnly(); }

  /** The backing array, or null for a buffer tensor. */
  public Object array() { return array; }

  /** How the memory of two host tensors relates ({@link #overlap}). */
  public enum Overlap {
    /** No byte in common (or one of them has no elements). */
    DISJOINT,
    /** Both start at the same byte: an in-place call. */
    SAME_START,
    /** They share bytes but start at different ones. */
    PARTIAL,
    /** Two direct buffers whose addresses this JVM does not reveal. */
    UNKNOWN
  }

  /**
   * How this tensor's memory and {@code o}'s relate. Array tensors view whole arrays from element 0, so
   * two of them either are over the same array (the same start) or share nothing, and an array never
   * shares memory with a direct buffer; two direct buffers are compared by address and byte length.
   */
  public Overlap overlap(HostTensor o) {
    if (count == 0 || o.count == 0) return Overlap.DISJOINT;
    if (array != null || o.array != null) return array == o.array ? Overlap.SAME_START : Overlap.DISJOINT;
    long a = DirectBuffers.address(buffer), b = DirectBuffers.address(o.buffer);
    if (a < 0 || b < 0) return Overlap.UNKNOWN;
    if (a == b) return Overlap.SAME_START;
    return a < b + o.bytes() && b < a + bytes() ? Overlap.PARTIAL : Overlap.DISJOINT;
  }

  /** Copies {@code n} elements from element {@code from} into {@code dst} at absolute byte offset {@code dstByte}, native order. */
  public void copyTo(long from, int n, ByteBuffer dst, int dstByte) {
    int f = Math.toIntExact(from);
    ByteBuffer d = dst.duplicate().order(ByteOrder.nativeOrder());
    d.position(dstByte);
    if (buffer != null) {
      ByteBuffer s = buffer.duplicate();
      s.position(f * dtype.size()).limit((f + n) * dtype.size());
      d.put(s);
      return;
    }
    switch (dtype) {
      case FLOAT32: d.asFloatBuffer().put((float[]) array, f, n); break;
      case FLOAT64: d.asDoubleBuffer().put((double[]) array, f, n); break;
      case INT32: d.asIntBuffer().put((int[]) array, f, n); break;
      case INT64: d.asLongBuffer().put((long[]) array, f, n); break;
      default: d.asShortBuffer().put((short[]) array, f, n); break;
    }
  }

  /** Copies {@code n} elements from {@code src} at absolute byte offset {@code srcByte} into element {@code to} onwards. */
  public void copyFrom(ByteBuffer src, int srcByte, long to, int n) {
    int t = Math.toIntExact(to);
    ByteBuffer s = src.duplicate().order(ByteOrder.nativeOrder());
    s.position(srcByte).limit(srcByte + n * dtype.size());
    if (buffer != null) {
      ByteBuffer d = buffer.duplicate();
      d.position(t * dtype.size());
      d.put(s);
      return;
    }
    switch (dtype) {
      case FLOAT32: s.asFloatBuffer().get((float[]) array, t, n); break;
      case FLOAT64: s.asDoubleBuffer().get((double[]) array, t, n); break;
      case INT32: s.asIntBuffer().get((int[]) array, t, n); break;
      case INT64: s.asLongBuffer().get((long[]) array, t, n); break;
      default: s.asShortBuffer().get((short[]) array, t, n); break;
    }
  }

  /** Element {@code i} as a double (bf16/fp16 decoded). For tests and references, not hot paths. */
  public double getDouble(long i) {
    int k = Math.toIntExact(i);
    if (buffer != null) {
      int b = k * dtype.size();
      switch (dtype) {
        case FLOAT32: return buffer.getFloat(b);
        case FLOAT64: return buffer.getDouble(b);
        case INT32: return buffer.getInt(b);
        case INT64: return buffer.getLong(b);
        case BFLOAT16: return HalfFloats.bf16ToFloat(buffer.getShort(b));
        default: return HalfFloats.fp16ToFloat(buffer.getShort(b));
      }
    }
    switch (dtype) {
      case FLOAT32: return ((float[]) array)[k];
      case FLOAT64: return ((double[]) array)[k];
      case INT32: return ((int[]) array)[k];
      case INT64: return ((long[]) array)[k];
      case BFLOAT16: return HalfFloats.bf16ToFloat(((short[]) array)[k]);
      default: return HalfFloats.fp16ToFloat(((short[]) array)[k]);
    }
  }

  /** Sets element {@code i} from a double (rounded to nearest for narrower types). For tests and demos. */
  public void setDouble(long i, double v) {
    int k = Math.toIntExact(i);
    if (buffer != null) {
      int b = k * dtype.size();
      switch (dtype) {
        case FLOAT32: buffer.putFloat(b, (float) v); return;
        case FLOAT64: buffer.putDouble(b, v); return;
        case INT32: buffer.putInt(b, (int) v); return;
        case INT64: buffer.putLong(b, (long) v); return;
        case BFLOAT16: buffer.putShort(b, HalfFloats.floatToBf16((float) v)); return;
        default: buffer.putShort(b, HalfFloats.floatToFp16((float) v)); return;
      }
    }
    switch (dtype) {
      case FLOAT32: ((float[]) array)[k] = (float) v; return;
      case FLOAT64: ((double[]) array)[k] = v; return;
      case INT32: ((int[]) array)[k] = (int) v; return;
      case INT64: ((long[]) array)[k] = (long) v; return;
      case BFLOAT16: ((short[]) array)[k] = HalfFloats.floatToBf16((float) v); return;
      default: ((short[]) array)[k] = HalfFloats.floatToFp16((float) v);
    }
  }

  @Override public String toString() {
    return "HostTensor[" + dtype + " x " + count + (buffer != null ? ", direct buffer]" : ", array]");
  }
}
