package io.sparkcomms.collectives.gpu;

import io.sparkcomms.nativeapi.SparkCommsNative;

/**
 * Element-wise device steps of collectives composed from others, asynchronous on the stream given
 * (an address): copies, the division that ends an AVG composed from SUMs, float conversions, sums,
 * and the FP8 block codec of a cross-node leg.
 */
public final class DeviceOps {
  private DeviceOps() {}

  /** Copies {@code from} into {@code to} (device tensors of one count and dtype). */
  public static void copy(DeviceTensor from, DeviceTensor to, long stream) {
    if (from.count() != to.count() || from.dtype() != to.dtype()) throw new IllegalArgumentException("copy of " + from + " into " + to);
    Native.check(SparkCommsNative.sc_memcpy_dtod(to.pointer(), from.pointer(), from.count() * (long) from.dtype().size(),
        new AddressPointer(stream)), "sc_memcpy_dtod");
  }

  /** {@code t[i] /= divisor} ({@code sc_divide}: integers truncate, bf16/fp16 round once). */
  public static void divide(DeviceTensor t, long divisor, long stream) {
    Native.check(SparkCommsNative.sc_divide(t.pointer(), t.count(), t.dtype().code(), divisor, new AddressPointer(stream)), "sc_divide");
  }

  /** {@code to[i] = from[i]} converted between FLOAT32, BFLOAT16 and FLOAT16 ({@code sc_convert}: narrowing rounds to nearest even). */
  public static void convert(DeviceTensor from, DeviceTensor to, long stream) {
    if (from.count() != to.count()) throw new IllegalArgumentException("convert " + from + " into " + to);
    Native.check(SparkCommsNative.sc_convert(from.pointer(), from.dtype().code(), to.pointer(), to.dtype().code(), from.count(),
        new AddressPointer(stream)), "sc_convert");
  }

  /** {@code y[i] += x[i]} ({@code sc_add}). */
  public static void add(DeviceTensor x, DeviceTensor y, long stream) {
    if (x.count() != y.count() || x.dtype() != y.dtype()) throw new IllegalArgumentException("add " + x + " into " + y);
    Native.check(SparkCommsNative.sc_add(x.pointer(), y.pointer(), x.count(), x.dtype().code(), new AddressPointer(stream)), "sc_add");
  }

  /** Bytes of {@code count} elements FP8-encoded in blocks of {@code blockSize} (codes, padding, scales; a multiple of 4). */
  public static long encodedBytes(long count, int blockSize) {
    return SparkCommsNative.sc_lp_encoded_bytes(count, blockSize);
  }

  /** {@code src} (FLOAT32 or BFLOAT16) FP8-encoded into {@code dst} (INT32 words, {@link #encodedBytes} / 4 of them). */
  public static void quantize(DeviceTensor src, DeviceTensor dst, int fp8Format, int blockSize, long stream) {
    if (dst.count() * 4 < encodedBytes(src.count(), blockSize)) throw new IllegalArgumentException("quantize " + src + " into " + dst);
    Native.check(SparkCommsNative.sc_quantize(src.pointer(), src.count(), src.dtype().code(), fp8Format, blockSize, dst.pointer(),
        new AddressPointer(stream)), "sc_quantize");
  }

  /** The encoded words {@code src} decoded into {@code dst} (FLOAT32 or BFLOAT16, {@code dst.count()} elements). */
  public static void dequantize(DeviceTensor src, DeviceTensor dst, int fp8Format, int blockSize, long stream) {
    if (src.count() * 4 < encodedBytes(dst.count(), blockSize)) throw new IllegalArgumentException("dequantize " + src + " into " + dst);
    Native.check(SparkCommsNative.sc_dequantize(src.pointer(), dst.count(), fp8Format, blockSize, dst.pointer(), dst.dtype().code(),
        new AddressPointer(stream)), "sc_dequantize");
  }
}
