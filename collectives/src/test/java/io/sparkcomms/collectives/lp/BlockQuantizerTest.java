package io.sparkcomms.collectives.lp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ReadOnlyBufferException;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class BlockQuantizerTest {

    private static float scaleAt(ByteBuffer b, int index) {
        // Independent little-endian read, byte by byte.
        int bits = (b.get(index) & 0xFF) | (b.get(index + 1) & 0xFF) << 8
                | (b.get(index + 2) & 0xFF) << 16 | (b.get(index + 3) & 0xFF) << 24;
        return Float.intBitsToFloat(bits);
    }

    private static boolean isPowerOfTwo(float s) {
        return s > 0 && s == Math.scalb(1.0f, Math.getExponent((double) s));
    }

    /** Reference of the spec written out directly (independently of the class's loops). */
    private static void referenceQuantize(float[] x, int n, int bs, Fp8Format f, byte[] codes,
                                          float[] scales) {
        for (int b = 0; b * bs < n; b++) {
            double amax = 0;
            for (int i = b * bs; i < Math.min(n, (b + 1) * bs); i++) {
                if (Float.isFinite(x[i])) {
                    amax = Math.max(amax, Math.abs((double) x[i]));
                }
            }
            int e = 0;
            if (amax > 0) {
                // smallest e with amax / 2^e <= max, by search
                e = -200;
                while (amax / Math.pow(2, e) > f.maxFinite()) {
                    e++;
                }
                e = Math.max(-126, Math.min(127, e));
            }
            scales[b] = (float) Math.pow(2, e);
            for (int i = b * bs; i < Math.min(n, (b + 1) * bs); i++) {
                codes[i] = Fp8Codec.encode(Math.scalb(x[i], -e), f);
            }
        }
    }

    @Test
    void constructorAndGetters() {
        BlockQuantizer q = new BlockQuantizer(Fp8Format.E4M3FNUZ, 32);
        assertSame(Fp8Format.E4M3FNUZ, q.format());
        assertEquals(32, q.blockSize());
        assertThrows(IllegalArgumentException.class, () -> new BlockQuantizer(Fp8Format.E4M3FN, 0));
        assertThrows(IllegalArgumentException.class, () -> new BlockQuantizer(Fp8Format.E4M3FN, -3));
        assertThrows(NullPointerException.class, () -> new BlockQuantizer(null, 8));
    }

    @Test
    void encodedBytesLayoutSizes() {
        assertEquals(0, BlockQuantizer.encodedBytes(0, 32));
        assertEquals(4 + 4, BlockQuantizer.encodedBytes(1, 32));
        assertEquals(4 + 4, BlockQuantizer.encodedBytes(4, 4));
        assertEquals(8 + 8, BlockQuantizer.encodedBytes(5, 4));
        assertEquals(32 + 4, BlockQuantizer.encodedBytes(32, 32));
        assertEquals(36 + 8, BlockQuantizer.encodedBytes(33, 32));
        assertEquals(100 + 400, BlockQuantizer.encodedBytes(100, 1));
        assertEquals(1024 + 4 * 8, new BlockQuantizer(Fp8Format.E4M3FN, 128).encodedBytes(1024));
        assertThrows(IllegalArgumentException.class, () -> BlockQuantizer.encodedBytes(-1, 4));
        assertThrows(IllegalArgumentException.class, () -> BlockQuantizer.encodedBytes(4, 0));
        assertThrows(IllegalArgumentException.class,
                () -> BlockQuantizer.encodedBytes(Integer.MAX_VALUE, 1));
    }

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void scaleExponentRule(Fp8Format f) {
        float max = f.maxFinite();
        assertEquals(0, BlockQuantizer.scaleExponent(0f, f));
        assertEquals(0, BlockQuantizer.scaleExponent(Float.NaN, f));
        assertEquals(0, BlockQuantizer.scaleExponent(Float.POSITIVE_INFINITY, f));
        assertEquals(0, BlockQuantizer.scaleExponent(max, f));
        assertEquals(1, BlockQuantizer.scaleExponent(Math.nextUp(max), f));
        assertEquals(-1, BlockQuantizer.scaleExponent(max / 2, f));
        assertEquals(0, BlockQuantizer.scaleExponent(Math.nextUp(max / 2), f));
        assertEquals(f == Fp8Format.E4M3FN ? -8 : -7, BlockQuantizer.scaleExponent(1f, f));
        assertEquals(-126, BlockQuantizer.scaleExponent(Float.MIN_VALUE, f), "clamped");
        assertEquals(-126, BlockQuantizer.scaleExponent(Float.MIN_NORMAL, f), "clamped");
        SplittableRandom rnd = new SplittableRandom(99);
        for (int i = 0; i < 200_000; i++) {
            float a = Math.abs(Float.intBitsToFloat(rnd.nextInt()));
            if (!Float.isFinite(a) || a == 0) {
                continue;
            }
            int e = BlockQuantizer.scaleExponent(a, f);
            assertTrue(e >= -126 && e <= 127);
            double q = a / Math.pow(2, e);
            assertTrue(q <= max, "amax / 2^e <= max");
            assertTrue(e == -126 || a / Math.pow(2, e - 1) > max, "e is the smallest");
        }
    }

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void layoutMatchesSpecAndLeavesBufferStateAlone(Fp8Format f) {
        int n = 37;
        int bs = 16;
        SplittableRandom rnd = new SplittableRandom(7);
        float[] src = new float[n + 5];
        for (int i = 0; i < src.length; i++) {
            src[i] = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(-3, 4)));
        }
        int srcOff = 3;
        float[] x = Arrays.copyOfRange(src, srcOff, srcOff + n);
        BlockQuantizer q = new BlockQuantizer(f, bs);
        int size = BlockQuantizer.encodedBytes(n, bs);
        assertEquals(40 + 3 * 4, size);
        for (ByteBuffer dst : new ByteBuffer[] {ByteBuffer.allocate(size + 20),
                ByteBuffer.allocateDirect(size + 20).order(ByteOrder.LITTLE_ENDIAN)}) {
            ByteOrder order = dst.order();
            for (int i = 0; i < dst.capacity(); i++) {
                dst.put(i, (byte) 0x55);
            }
            dst.position(2).limit(size + 15);
            int dstOff = 9;
            q.quantize(src, srcOff, n, dst, dstOff);
            assertEquals(2, dst.position());
            assertEquals(size + 15, dst.limit());
            assertSame(order, dst.order());
            for (int i = 0; i < dstOff; i++) {
                assertEquals((byte) 0x55, dst.get(i), "before run untouched");
            }
            for (int i = dstOff + size; i < dst.limit(); i++) {
                assertEquals((byte) 0x55, dst.get(i), "after run untouched");
            }
            byte[] codes = new byte[n];
            float[] scales = new float[3];
            referenceQuantize(x, n, bs, f, codes, scales);
            for (int i = 0; i < n; i++) {
                assertEquals(codes[i], dst.get(dstOff + i), "code " + i);
            }
            for (int i = n; i < 40; i++) {
                assertEquals(0, dst.get(dstOff + i), "padding");
            }
            for (int b = 0; b < 3; b++) {
                float s = scaleAt(dst, dstOff + 40 + 4 * b);
                assertEquals(scales[b], s, "scale " + b);
                assertTrue(isPowerOfTwo(s));
            }
            // Dequantize from the same buffer (whatever its order) into an offset array.
            float[] out = new float[n + 4];
            Arrays.fill(out, -7f);
            q.dequantize(dst, dstOff, n, out, 2);
            assertEquals(-7f, out[0]);
            assertEquals(-7f, out[1]);
            assertEquals(-7f, out[n + 2]);
            for (int i = 0; i < n; i++) {
                float want = Math.scalb(Fp8Codec.decode(codes[i], f),
                        Math.getExponent(scales[i / bs]));
                assertEquals(want, out[2 + i], "dequantized " + i);
            }
            assertEquals(2, dst.position());
        }
    }

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void zeroNanInfBlocks(Fp8Format f) {
        float inf = Float.POSITIVE_INFINITY;
        float nan = Float.NaN;
        float[] x = {
            0f, -0f, 0f, 0f,                    // zero block
            nan, inf, -inf, nan,                // no finite element
            inf, 1f, -2f, nan,                  // amax = 2 over finite elements
            1e-3f, 0f                           // last short block
        };
        int n = x.length;
        BlockQuantizer q = new BlockQuantizer(f, 4);
        ByteBuffer buf = ByteBuffer.allocate(q.encodedBytes(n));
        q.quantize(x, 0, n, buf, 0);
        int sOff = 16;
        assertEquals(1.0f, scaleAt(buf, sOff), "zero block has scale 1");
        assertEquals(1.0f, scaleAt(buf, sOff + 4), "non-finite block has scale 1");
        assertEquals(Math.scalb(1f, BlockQuantizer.scaleExponent(2f, f)), scaleAt(buf, sOff + 8));
        assertEquals(Math.scalb(1f, BlockQuantizer.scaleExponent(1e-3f, f)), scaleAt(buf, sOff + 12));
        for (int i = 0; i < 4; i++) {
            assertEquals(0f, Math.abs(Fp8Codec.decode(buf.get(i), f)));
        }
        for (int i = 4; i < 8; i++) {
            assertEquals(f.nanCode(), buf.get(i), "NaN and Inf encode to the NaN code");
        }
        assertEquals(f.nanCode(), buf.get(8));
        assertEquals(f.nanCode(), buf.get(11));
        float[] out = new float[n];
        q.dequantize(buf, 0, n, out, 0);
        assertEquals(0f, out[0]);
        for (int i = 4; i < 8; i++) {
            assertTrue(Float.isNaN(out[i]));
        }
        assertTrue(Float.isNaN(out[8]), "Inf comes back as NaN (no Inf in E4M3)");
        assertEquals(1f, out[9]);
        assertEquals(-2f, out[10]);
        assertTrue(Float.isNaN(out[11]));
        assertEquals(1e-3f, out[12], 1e-3f / 16);
        assertEquals(0f, out[13]);
    }

    /** The block maximum lands in (max/2, max] after scaling: the power of two is tight. */
    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void powerOfTwoScaleIsTight(Fp8Format f) {
        SplittableRandom rnd = new SplittableRandom(3);
        int n = 64 * 100;
        int bs = 64;
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) (rnd.nextGaussian() * Math.pow(2, (i / bs) - 50));
        }
        BlockQuantizer q = new BlockQuantizer(f, bs);
        ByteBuffer buf = ByteBuffer.allocate(q.encodedBytes(n));
        q.quantize(x, 0, n, buf, 0);
        for (int b = 0; b < n / bs; b++) {
            float s = scaleAt(buf, n + 4 * b);
            assertTrue(isPowerOfTwo(s));
            double amax = 0;
            for (int i = b * bs; i < (b + 1) * bs; i++) {
                amax = Math.max(amax, Math.abs(x[i]));
            }
            assertTrue(amax / s <= f.maxFinite() && amax / s > f.maxFinite() / 2, "block " + b);
        }
    }

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void accuracyOnGaussianData(Fp8Format f) {
        int n = 1 << 20;
        int bs = 128;
        SplittableRandom rnd = new SplittableRandom(11);
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        BlockQuantizer q = new BlockQuantizer(f, bs);
        ByteBuffer buf = ByteBuffer.allocateDirect(q.encodedBytes(n));
        q.quantize(x, 0, n, buf, 0);
        float[] y = new float[n];
        q.dequantize(buf, 0, n, y, 0);
        double minNormal = Math.pow(2, 1 - f.exponentBias());
        double halfMinSub = Math.pow(2, -3 - f.exponentBias());
        int normalCount = 0;
        for (int i = 0; i < n; i++) {
            double scale = scaleAt(buf, n + 4 * (i / bs));
            double err = Math.abs((double) x[i] - y[i]);
            if (Math.abs(x[i]) / scale >= minNormal) {
                normalCount++;
                if (err > 0x1p-4 * Math.abs(x[i])) {
                    fail("relative error at " + i + ": " + x[i] + " -> " + y[i]);
                }
            } else if (err > scale * halfMinSub) {
                fail("absolute error in subnormal range at " + i + ": " + x[i] + " -> " + y[i]);
            }
        }
        assertTrue(normalCount > n * 0.99, "almost all N(0,1) values are in the normal range");
    }

    /**
     * Data spanning 1e-6 .. 1e4 in magnitude, in blocks of 32 of similar magnitude: block scaling
     * keeps every element within 2^-4 relative error, whereas a plain cast flushes small blocks
     * to zero (and saturates large ones).
     */
    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void blockScalingBeatsPlainCastOnWideRange(Fp8Format f) {
        int bs = 32;
        int blocks = 2000;
        int n = bs * blocks;
        SplittableRandom rnd = new SplittableRandom(5);
        float[] x = new float[n];
        for (int b = 0; b < blocks; b++) {
            double mag = Math.pow(10, -6 + 10.0 * b / (blocks - 1));   // 1e-6 .. 1e4
            for (int i = b * bs; i < (b + 1) * bs; i++) {
                x[i] = (float) (mag * (0.5 + 0.5 * rnd.nextDouble()) * (rnd.nextBoolean() ? 1 : -1));
            }
        }
        BlockQuantizer q = new BlockQuantizer(f, bs);
        ByteBuffer buf = ByteBuffer.allocate(q.encodedBytes(n));
        q.quantize(x, 0, n, buf, 0);
        float[] y = new float[n];
        q.dequantize(buf, 0, n, y, 0);

        double halfMinSub = Math.pow(2, -3 - f.exponentBias());
        int flushedByCast = 0;
        int saturatedByCast = 0;
        for (int i = 0; i < n; i++) {
            // Block scaled: within a block values span a factor of 2, so all are normal.
            assertTrue(Math.abs((double) x[i] - y[i]) <= 0x1p-4 * Math.abs(x[i]),
                    () -> "scaled relative error too large");
            assertTrue(y[i] != 0f);
            // Plain cast.
            float c = Fp8Codec.decode(Fp8Codec.encode(x[i], f), f);
            if (Math.abs(x[i]) < halfMinSub) {
                assertEquals(0f, c, 0f, "plain cast flushes to zero");
                flushedByCast++;
            }
            if (Math.abs(x[i]) > 2 * f.maxFinite()) {
                assertEquals(f.maxFinite(), Math.abs(c), "plain cast saturates");
                saturatedByCast++;
            }
        }
        // 1e-6 .. ~1e-3.5 (below half the smallest subnormal) is a large share of the blocks.
        assertTrue(flushedByCast > n / 5, "many elements flushed by plain cast: " + flushedByCast);
        assertTrue(saturatedByCast > n / 20, "many elements saturated by plain cast");
    }

    @Test
    void boundsAndEmpty() {
        BlockQuantizer q = new BlockQuantizer(Fp8Format.E4M3FN, 8);
        float[] x = new float[10];
        ByteBuffer small = ByteBuffer.allocate(q.encodedBytes(10) - 1);
        assertThrows(IndexOutOfBoundsException.class, () -> q.quantize(x, 0, 10, small, 0));
        ByteBuffer ok = ByteBuffer.allocate(q.encodedBytes(10));
        assertThrows(IndexOutOfBoundsException.class, () -> q.quantize(x, 1, 10, ok, 0));
        assertThrows(IndexOutOfBoundsException.class, () -> q.quantize(x, 0, 10, ok, 1));
        assertThrows(ReadOnlyBufferException.class,
                () -> q.quantize(x, 0, 10, ok.asReadOnlyBuffer(), 0));
        assertThrows(IndexOutOfBoundsException.class,
                () -> q.dequantize(ok, 0, 10, new float[9], 0));
        assertThrows(IndexOutOfBoundsException.class,
                () -> q.dequantize(small, 0, 10, new float[10], 0));
        // n = 0 is a no-op.
        q.quantize(x, 10, 0, ByteBuffer.allocate(0), 0);
        q.dequantize(ByteBuffer.allocate(0), 0, 0, new float[0], 0);
        // Read-only source is fine for dequantize.
        q.quantize(x, 0, 10, ok, 0);
        float[] y = new float[10];
        q.dequantize(ok.asReadOnlyBuffer(), 0, 10, y, 0);
        assertEquals(0f, y[3]);
    }
}
