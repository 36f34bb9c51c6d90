package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.lp.BlockQuantizer;
import io.sparkcomms.collectives.lp.Fp8Codec;
import io.sparkcomms.collectives.lp.Fp8Format;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.Pointer;

/**
 * The GPU FP8 codec against the Java oracle ({@link Fp8Codec}, {@link BlockQuantizer}), bit for bit:
 * all 256 codes of both formats, boundary and random floats (raw encode), and per-block quantize /
 * dequantize of fp32 and bf16 data (N(0,1), 1e-6..1e4, outliers, zeros / subnormals / Inf / NaN)
 * for several block sizes and odd counts. Needs one GPU. Run on the GPU host:
 * {@code java -cp '.gpu-stage/*:.gpu-stage/test-classes' io.sparkcomms.collectives.gpu.LpCodecCheckMain}
 * Exit status 0 only when everything matched.
 */
public final class LpCodecCheckMain {
  private LpCodecCheckMain() {}

  private static int failures;
  private static int passes;

  public static void main(String[] args) {
    System.exit(run(args.length > 0 ? Long.parseLong(args[0]) : System.nanoTime()) ? 0 : 1);
  }

  /** Runs every check; true when all passed. */
  public static boolean run(long seed) {
    GpuLibrary.require();
    failures = 0;
    passes = 0;
    System.out.println("LpCodecCheckMain seed=" + seed);
    SplittableRandom rnd = new SplittableRandom(seed);
    for (Fp8Format f : Fp8Format.values()) {
      codes(f);
      encode(f, rnd);
      for (int bs : new int[] {4, 32, 100, 128, 1024}) {
        for (int n : new int[] {1, 7, 128, 129, 1003, 100003}) {
          for (int kind = 0; kind < 4; kind++) {
            blocks(f, bs, n, kind, false, rnd);
            blocks(f, bs, n, kind, true, rnd);
          }
        }
      }
    }
    System.out.println("LpCodecCheckMain: " + passes + " checks passed, " + failures + " failed: " + (failures == 0 ? "PASSED" : "FAILED"));
    return failures == 0;
  }

  private static void check(boolean ok, String what) {
    if (ok) passes++;
    else {
      failures++;
      System.out.println("FAIL " + what);
    }
  }

  private static boolean sameFloat(float a, float b) {
    return (Float.isNaN(a) && Float.isNaN(b)) || Float.floatToRawIntBits(a) == Float.floatToRawIntBits(b);
  }

  // ---- device helpers ----
  private static Pointer dmalloc(long bytes) {
    Pointer p = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_malloc(p, Math.max(1, bytes)), "sc_malloc");
    return p;
  }

  private static ByteBuffer direct(long bytes) {
    return ByteBuffer.allocateDirect((int) Math.max(1, bytes)).order(ByteOrder.LITTLE_ENDIAN);
  }

  private static void htod(Pointer d, ByteBuffer h, long bytes) {
    Native.check(SparkCommsNative.sc_memcpy_htod(d, new Pointer(h), bytes, null), "sc_memcpy_htod");
  }

  private static void dtoh(ByteBuffer h, Pointer d, long bytes) {
    Native.check(SparkCommsNative.sc_memcpy_dtoh(new Pointer(h), d, bytes, null), "sc_memcpy_dtoh");
  }

  private static void free(Pointer... ps) {
    for (Pointer p : ps) SparkCommsNative.sc_free(p);
  }

  // ---- 1. all 256 codes ----
  private static void codes(Fp8Format f) {
    ByteBuffer h = direct(256);
    for (int i = 0; i < 256; i++) h.put(i, (byte) i);
    Pointer dc = dmalloc(256), df = dmalloc(1024);
    htod(dc, h, 256);
    Native.check(SparkCommsNative.sc_fp8_decode(dc, 256, f.ordinal(), df, null), "sc_fp8_decode");
    ByteBuffer out = direct(1024);
    dtoh(out, df, 1024);
    int bad = 0;
    for (int i = 0; i < 256; i++) if (!sameFloat(out.getFloat(4 * i), Fp8Codec.decode((byte) i, f))) bad++;
    check(bad == 0, f + ": " + bad + " of 256 codes decode differently from Fp8Codec");
    free(dc, df);
  }

  // ---- 2. raw encode of boundary and random floats ----
  private static void encode(Fp8Format f, SplittableRandom rnd) {
    List<Float> xs = new ArrayList<>();
    for (int c = 0; c < 256; c++) {
      float v = Fp8Codec.decode((byte) c, f);
      if (Float.isNaN(v)) continue;
      xs.add(v);
      xs.add(Math.nextUp(v));
      xs.add(Math.nextDown(v));
      float nx = Fp8Codec.decode((byte) (c + 1), f);
      if ((c & 0x7F) != 0x7F && !Float.isNaN(nx)) {
        float mid = (float) (((double) v + nx) / 2);
        xs.add(mid);
        xs.add(Math.nextUp(mid));
        xs.add(Math.nextDown(mid));
      }
    }
    float[] extra = {0f, -0f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN, Float.intBitsToFloat(0xFFC00001),
        f.maxFinite() * 1.0625f, f.maxFinite() * 1.03f, 1e30f, -1e30f, Float.MAX_VALUE, -Float.MAX_VALUE, Float.MIN_NORMAL,
        Float.MIN_VALUE, -Float.MIN_VALUE, Float.intBitsToFloat(0x007FFFFF), Math.scalb(1f, -f.exponentBias() - 3),
        Math.nextUp(Math.scalb(1f, -f.exponentBias() - 3)), Math.scalb(1.5f, -f.exponentBias() - 2)};
    for (float e : extra) xs.add(e);
    int n = xs.size() + 2 * (1 << 20);
    ByteBuffer h = direct(4L * n);
    float[] all = new float[n];
    int k = 0;
    for (float x : xs) all[k++] = x;
    while (k < xs.size() + (1 << 20)) all[k++] = Float.intBitsToFloat(rnd.nextInt());
    while (k < n) all[k++] = (float) (rnd.nextGaussian() * Math.scalb(1.0, rnd.nextInt(40) - 20));
    for (int i = 0; i < n; i++) h.putFloat(4 * i, all[i]);
    Pointer dx = dmalloc(4L * n), dc = dmalloc(n);
    htod(dx, h, 4L * n);
    Native.check(SparkCommsNative.sc_fp8_encode(dx, n, f.ordinal(), dc, null), "sc_fp8_encode");
    ByteBuffer out = direct(n);
    dtoh(out, dc, n);
    int bad = 0, first = -1;
    for (int i = 0; i < n; i++) {
      if (out.get(i) != Fp8Codec.encode(all[i], f)) {
        if (first < 0) first = i;
        bad++;
      }
    }
    check(bad == 0, f + ": " + bad + " of " + n + " floats encode differently"
        + (first >= 0 ? " (first " + Float.toHexString(all[first]) + ": gpu " + (out.get(first) & 0xFF) + " java "
            + (Fp8Codec.encode(all[first], f) & 0xFF) + ")" : ""));
    if (bad == 0) System.out.println(f + ": 256 codes and " + n + " boundary/random floats bit-exact with Fp8Codec");
    free(dx, dc);
  }

  // ---- 3. per-block quantize / dequantize ----
  static float value(int kind, SplittableRandom r, int i) {
    switch (kind) {
      case 0: return (float) r.nextGaussian();
      case 1: return (float) ((r.nextBoolean() ? -1 : 1) * Math.pow(10, -6 + 10 * r.nextDouble()));
      case 2: {
        double v = r.nextGaussian();
        return (float) (r.nextDouble() < 1e-3 ? v * 1e4 : v);
      }
      default: {
        if ((i / 128) % 7 == 3) return 0f;
        switch (r.nextInt(16)) {
          case 0: return Float.POSITIVE_INFINITY;
          case 1: return Float.NEGATIVE_INFINITY;
          case 2: return Float.NaN;
          case 3: return Float.intBitsToFloat(r.nextInt() & 0x807FFFFF);
          case 4: return Float.intBitsToFloat((r.nextInt() & 0x80FFFFFF) | 0x7F000000);
          case 5: return -0f;
          default: return (float) (r.nextGaussian() * Math.scalb(1.0, r.nextInt(60) - 30));
        }
      }
    }
  }

  static short toBf16(float f) {
    int u = Float.floatToRawIntBits(f);
    if ((u & 0x7FFFFFFF) > 0x7F800000) return (short) ((u >>> 16) | 0x40);
    u += 0x7FFF + ((u >>> 16) & 1);
    return (short) (u >>> 16);
  }

  static float fromBf16(short b) {
    return Float.intBitsToFloat((b & 0xFFFF) << 16);
  }

  private static void blocks(Fp8Format f, int bs, int n, int kind, boolean bf16, SplittableRandom rnd) {
    String what = f + " bs=" + bs + " n=" + n + " kind=" + kind + (bf16 ? " bf16" : " fp32");
    float[] x = new float[n];
    int es = bf16 ? 2 : 4;
    ByteBuffer hin = direct((long) es * n);
    for (int i = 0; i < n; i++) {
      float v = value(kind, rnd, i);
      if (bf16) {
        short b = toBf16(v);
        hin.putShort(2 * i, b);
        x[i] = fromBf16(b);
      } else {
        hin.putFloat(4 * i, v);
        x[i] = v;
      }
    }
    BlockQuantizer q = new BlockQuantizer(f, bs);
    int rb = q.encodedBytes(n);
    if (SparkCommsNative.sc_lp_encoded_bytes(n, bs) != rb) {
      check(false, what + ": sc_lp_encoded_bytes " + SparkCommsNative.sc_lp_encoded_bytes(n, bs) + " != " + rb);
      return;
    }
    ByteBuffer want = ByteBuffer.allocate(rb).order(ByteOrder.LITTLE_ENDIAN);
    q.quantize(x, 0, n, want, 0);
    int dt = bf16 ? SparkCommsNative.SC_BFLOAT16 : SparkCommsNative.SC_FLOAT32;
    Pointer din = dmalloc((long) es * n), drun = dmalloc(rb), dout = dmalloc((long) es * n);
    htod(din, hin, (long) es * n);
    Native.check(SparkCommsNative.sc_memset(drun, 0xAB, rb, null), "sc_memset");
    Native.check(SparkCommsNative.sc_quantize(din, n, dt, f.ordinal(), bs, drun, null), "sc_quantize");
    ByteBuffer got = direct(rb);
    dtoh(got, drun, rb);
    int bad = 0;
    for (int i = 0; i < rb; i++) if (got.get(i) != want.get(i)) bad++;
    check(bad == 0, what + ": " + bad + " of " + rb + " encoded bytes differ from BlockQuantizer.quantize");
    // dequantize the Java run on the GPU
    float[] y = new float[n];
    q.dequantize(want, 0, n, y, 0);
    ByteBuffer hw = direct(rb);
    for (int i = 0; i < rb; i++) hw.put(i, want.get(i));
    htod(drun, hw, rb);
    Native.check(SparkCommsNative.sc_dequantize(drun, n, f.ordinal(), bs, dout, dt, null), "sc_dequantize");
    ByteBuffer hy = direct((long) es * n);
    dtoh(hy, dout, (long) es * n);
    int badd = 0;
    for (int i = 0; i < n; i++) {
      boolean ok;
      if (bf16) {
        short g = hy.getShort(2 * i), w = toBf16(y[i]);
        ok = g == w || (Float.isNaN(fromBf16(g)) && Float.isNaN(fromBf16(w)));
      } else {
        ok = sameFloat(hy.getFloat(4 * i), y[i]);
      }
      if (!ok) badd++;
    }
    check(badd == 0, what + ": " + badd + " of " + n + " dequantized values differ from BlockQuantizer.dequantize");
    free(din, drun, dout);
  }
}
