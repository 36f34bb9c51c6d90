package io.sparkcomms.collectives.lp;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.util.Objects;

/**
 * Per-block scaled FP8 quantization. This class is the bit-exact reference that every backend
 * (the Java host backend, CUDA and HIP kernels) must reproduce.
 *
 * <h2>Scale rule</h2>
 * The input run of n floats is cut into blocks of {@code blockSize} consecutive elements (the
 * last block may be shorter). For each block:
 * <ol>
 *   <li>{@code amax} = max |x| over the <b>finite</b> elements of the block (NaN and ±Inf are
 *       ignored).</li>
 *   <li>If {@code amax == 0} (or the block has no finite element) the scale exponent is
 *       {@code e = 0}. Otherwise {@code e} is the smallest integer with
 *       {@code amax / 2^e <= format.maxFinite()}, i.e. {@code e = ceil(log2(amax / max))}
 *       computed exactly (see {@link #scaleExponent}), then clamped to [-126, 127].</li>
 *   <li>The scale is {@code 2^e}, a power of two. Each element is encoded as
 *       {@code Fp8Codec.encode(x * 2^-e)}: multiplying by a power of two is exact unless the
 *       product underflows below 2^-126, and such products are far below half the smallest FP8
 *       subnormal, so they encode to zero either way (rounding is monotone). Hence
 *       {@code x * 2^-e} here equals {@code Math.scalb(x, -e)}, and GPU kernels may compute it
 *       as {@code x * exp2f(-e)} provided they do not flush subnormals to zero (2^-127 is a
 *       subnormal float; it only arises for e = 127, which real data never reaches).</li>
 *   <li>Decoding is {@code Fp8Codec.decode(q) * 2^e}, also exact: an FP8 value has at most 4
 *       significant bits and magnitude at least 2^-10, so the product (at least 2^-136) is a
 *       representable float.</li>
 * </ol>
 * Scaled finite values satisfy {@code |x * 2^-e| <= max}, so saturation never triggers inside a block;
 * ±Inf elements encode (and decode) as NaN, NaN stays NaN.
 *
 * <h2>Wire layout</h2>
 * An encoded run of n elements, starting at some byte offset, is:
 * <pre>
 *   n code bytes | zero padding up to a multiple of 4 bytes | ceil(n / blockSize) scales
 * </pre>
 * where each scale is the float32 {@code 2^e} stored little-endian. Total size:
 * {@link #encodedBytes(int, int)}.
 *
 * <p>Instances are immutable and thread-safe.
 */
public final class BlockQuantizer {

    private final Fp8Format format;
    private final int blockSize;

    /**
     * @param format    FP8 format of the codes
     * @param blockSize elements per scale block, at least 1
     * @throws IllegalArgumentException if {@code blockSize < 1}
     * @throws NullPointerException     if format is null
     */
    public BlockQuantizer(Fp8Format format, int blockSize) {
        this.format = Objects.requireNonNull(format, "format");
        if (blockSize < 1) {
            throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
        }
        this.blockSize = blockSize;
    }

    public Fp8Format format() {
        return format;
    }

    public int blockSize() {
        return blockSize;
    }

    /** {@code encodedBytes(n, blockSize())}. */
    public int encodedBytes(int n) {
        return encodedBytes(n, blockSize);
    }

    /**
     * Size in bytes of an encoded run of n elements: {@code roundUp(n, 4) + 4 * ceil(n / blockSize)}.
     *
     * @throws IllegalArgumentException if {@code n < 0}, {@code blockSize < 1}, or the size overflows an int
     */
    public static int encodedBytes(int n, int blockSize) {
        if (n < 0) {
            throw new IllegalArgumentException("n must be >= 0, got " + n);
        }
        if (blockSize < 1) {
            throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
        }
        long size = codeBytesPadded(n) + 4L * numBlocks(n, blockSize);
        if (size > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("encoded size of " + n + " elements overflows int");
        }
        return (int) size;
    }

    /** Number of scale blocks for n elements: ceil(n / blockSize). */
    private static long numBlocks(int n, int blockSize) {
        return ((long) n + blockSize - 1) / blockSize;
    }

    /** Byte count of the codes plus padding: n rounded up to a multiple of 4. */
    private static long codeBytesPadded(int n) {
        return ((long) n + 3) & ~3L;
    }

    /**
     * The scale exponent e of a block with the given amax: 0 if {@code amax} is not a positive
     * finite number; otherwise the smallest integer e with {@code amax <= f.maxFinite() * 2^e},
     * clamped to [-126, 127].
     *
     * <p>Exact computation: write {@code amax = ma * 2^ea} and {@code max = mm * 2^em} with
     * {@code ma, mm} in [1, 2). Then {@code e = ea - em} if {@code ma <= mm}, else
     * {@code e = ea - em + 1} (for {@code e - 1} the quotient would be
     * {@code 2 * ma * 2^em > mm * 2^em} since {@code 2 * ma >= 2 > mm}). Exponents are taken on the value
     * widened to double, so float subnormal amax is handled exactly as well.
     */
    public static int scaleExponent(float amax, Fp8Format f) {
        if (!(amax > 0f) || amax == Float.POSITIVE_INFINITY) {
            return 0;
        }
        double a = amax;
        double max = f.maxFinite();
        int ea = Math.getExponent(a);
        int em = Math.getExponent(max);
        int e = ea - em;
        if (Math.scalb(a, -ea) > Math.scalb(max, -em)) {
            e++;
        }
        return Math.max(-126, Math.min(127, e));
    }

    /**
     * Quantizes {@code src[srcOff .. srcOff+n)} into {@code dst} at absolute byte offset
     * {@code dstOff}, writing {@link #encodedBytes(int) encodedBytes(n)} bytes in the layout
     * described in the class comment (scales little-endian whatever {@code dst.order()} is).
     * Neither position, limit nor order of {@code dst} is changed.
     *
     * @throws IndexOutOfBoundsException if the source range is outside {@code src} or the
     *                                   destination range is beyond {@code dst.limit()}
     * @throws ReadOnlyBufferException   if dst is read-only
     */
    public void quantize(float[] src, int srcOff, int n, ByteBuffer dst, int dstOff) {
        int size = encodedBytes(n, blockSize);
        Objects.checkFromIndexSize(srcOff, n, src.length);
        Objects.checkFromIndexSize(dstOff, size, dst.limit());
        if (dst.isReadOnly()) {
            throw new ReadOnlyBufferException();
        }
        final Fp8Format f = format;
        final boolean littleEndian = dst.order() == ByteOrder.LITTLE_ENDIAN;
        final int padded = (int) codeBytesPadded(n);
        int scalePos = dstOff + padded;
        for (int start = 0; start < n; start += blockSize) {
            final int end = Math.min(n, start + blockSize);
            // Pass 1: amax over finite elements (NaN fails a > amax; Inf is excluded explicitly).
            float amax = 0f;
            for (int i = srcOff + start, lim = srcOff + end; i < lim; i++) {
                float a = Math.abs(src[i]);
                if (a > amax && a != Float.POSITIVE_INFINITY) {
                    amax = a;
                }
            }
            final int e = scaleExponent(amax, f);
            // 2^-e is a float (2^-127 is subnormal but exact); x * 2^-e == Math.scalb(x, -e).
            final float inv = Math.scalb(1.0f, -e);
            // Pass 2: encode.
            for (int i = start; i < end; i++) {
                dst.put(dstOff + i, Fp8Codec.encode(src[srcOff + i] * inv, f));
            }
            putFloatLE(dst, scalePos, Math.scalb(1.0f, e), littleEndian);
            scalePos += 4;
        }
        for (int i = n; i < padded; i++) {
            dst.put(dstOff + i, (byte) 0);
        }
    }

    /**
     * Decodes an encoded run of n elements located at absolute byte offset {@code srcOff} of
     * {@code src} into {@code dst[dstOff .. dstOff+n)}: each element is
     * {@code Fp8Codec.decode(code) * scale} of its block. The buffer's position, limit and
     * order are not changed; scales are read little-endian.
     *
     * @throws IndexOutOfBoundsException if a range is out of bounds
     */
    public void dequantize(ByteBuffer src, int srcOff, int n, float[] dst, int dstOff) {
        int size = encodedBytes(n, blockSize);
        Objects.checkFromIndexSize(srcOff, size, src.limit());
        Objects.checkFromIndexSize(dstOff, n, dst.length);
        final float[] table = Fp8Codec.table(format);
        final boolean littleEndian = src.order() == ByteOrder.LITTLE_ENDIAN;
        int scalePos = srcOff + (int) codeBytesPadded(n);
        for (int start = 0; start < n; start += blockSize) {
            final int end = Math.min(n, start + blockSize);
            final float scale = getFloatLE(src, scalePos, littleEndian);
            scalePos += 4;
            for (int i = start; i < end; i++) {
                dst[dstOff + i] = table[src.get(srcOff + i) & 0xFF] * scale;
            }
        }
    }

    private static void putFloatLE(ByteBuffer b, int index, float v, boolean littleEndian) {
        int bits = Float.floatToRawIntBits(v);
        b.putInt(index, littleEndian ? bits : Integer.reverseBytes(bits));
    }

    private static float getFloatLE(ByteBuffer b, int index, boolean littleEndian) {
        int bits = b.getInt(index);
        return Float.intBitsToFloat(littleEndian ? bits : Integer.reverseBytes(bits));
    }
}
