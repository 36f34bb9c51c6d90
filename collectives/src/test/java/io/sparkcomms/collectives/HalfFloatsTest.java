package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class HalfFloatsTest {

    // ---------------------------------------------------------------------------------------
    // Independent references
    // ---------------------------------------------------------------------------------------

    /** fp16 decode from the field definition, in double. */
    private static double fp16Ref(int h) {
        int s = (h >>> 15) & 1;
        int e = (h >>> 10) & 0x1F;
        int m = h & 0x3FF;
        double v;
        if (e == 0) {
            v = m * Math.pow(2, -24);
        } else if (e == 31) {
            v = m == 0 ? Double.POSITIVE_INFINITY : Double.NaN;
        } else {
            v = (1 + m / 1024.0) * Math.pow(2, e - 15);
        }
        return s == 1 ? -v : v;
    }

    /**
     * Sorted non-negative magnitudes of a 16-bit format: index i is the value of bit pattern i
     * for i < count, and index count is the "next binade" value (2^16 for fp16, 2^128 for bf16)
     * standing for the infinity pattern. Patterns increase with value for non-negative values.
     */
    private static double[] magnitudes(int infPattern, java.util.function.IntToDoubleFunction dec,
                                       double beyond) {
        double[] v = new double[infPattern + 1];
        for (int i = 0; i < infPattern; i++) {
            v[i] = dec.applyAsDouble(i);
        }
        v[infPattern] = beyond;
        return v;
    }

    private static final double[] FP16_MAGS = magnitudes(0x7C00, HalfFloatsTest::fp16Ref, 65536.0);
    private static final double[] BF16_MAGS = magnitudes(0x7F80,
            i -> (double) Float.intBitsToFloat(i << 16), Math.pow(2, 128));

    /**
     * Reference RNE narrowing of a finite or infinite float: binary search for the two
     * neighbouring representable magnitudes (in exact double arithmetic), pick the nearer, on a
     * tie the even pattern; the slot beyond max finite is the infinity pattern (IEEE overflow).
     */
    private static int refNarrow(float x, double[] mags, int infPattern) {
        int sign = Float.floatToRawIntBits(x) < 0 ? 0x8000 : 0;
        double a = Math.abs((double) x);
        if (a >= mags[infPattern]) {
            return sign | infPattern;
        }
        int idx = Arrays.binarySearch(mags, a);
        if (idx >= 0) {
            return sign | idx;
        }
        int hi = -idx - 1;   // first element > a
        int lo = hi - 1;
        double dl = a - mags[lo];
        double dh = mags[hi] - a;   // exact: all values have few bits and similar exponents
        int pick;
        if (dl < dh) {
            pick = lo;
        } else if (dh < dl) {
            pick = hi;
        } else {
            pick = (lo & 1) == 0 ? lo : hi;
        }
        return sign | pick;
    }

    private static int fp16(float x) {
        return HalfFloats.floatToFp16(x) & 0xFFFF;
    }

    private static int bf16(float x) {
        return HalfFloats.floatToBf16(x) & 0xFFFF;
    }

    // ---------------------------------------------------------------------------------------
    // Exhaustive over all 16-bit patterns
    // ---------------------------------------------------------------------------------------

    @Test
    void fp16AllPatternsRoundTrip() {
        for (int code = 0; code < 0x10000; code++) {
            final int h = code;
            float f = HalfFloats.fp16ToFloat((short) h);
            double ref = fp16Ref(h);
            if (Double.isNaN(ref)) {
                assertTrue(Float.isNaN(f), () -> "pattern " + Integer.toHexString(h));
                int back = fp16(f);
                assertTrue((back & 0x7C00) == 0x7C00 && (back & 0x3FF) != 0, "NaN re-encodes to NaN");
                assertEquals(h & 0x8000, back & 0x8000, "NaN sign kept");
                assertEquals(0x200, back & 0x200, "quiet NaN");
            } else {
                assertEquals(ref, (double) f, () -> "decode " + Integer.toHexString(h));
                assertEquals(h, fp16(f), () -> "round trip " + Integer.toHexString(h));
            }
        }
    }

    @Test
    void bf16AllPatternsRoundTrip() {
        for (int code = 0; code < 0x10000; code++) {
            final int h = code;
            float f = HalfFloats.bf16ToFloat((short) h);
            boolean nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
            if (nan) {
                assertTrue(Float.isNaN(f), () -> "pattern " + Integer.toHexString(h));
                int back = bf16(f);
                assertTrue((back & 0x7F80) == 0x7F80 && (back & 0x7F) != 0, "NaN re-encodes to NaN");
                assertEquals(h & 0x8000, back & 0x8000, "NaN sign kept");
                assertEquals(0x40, back & 0x40, "quiet NaN");
            } else {
                assertEquals(h << 16, Float.floatToRawIntBits(f), "decode is bit shift");
                assertEquals(h, bf16(f), () -> "round trip " + Integer.toHexString(h));
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // Specific cases
    // ---------------------------------------------------------------------------------------

    @Test
    void fp16KnownValuesAndTies() {
        assertEquals(0x3C00, fp16(1.0f));
        assertEquals(0xBC00, fp16(-1.0f));
        assertEquals(0x0000, fp16(0.0f));
        assertEquals(0x8000, fp16(-0.0f));
        assertEquals(0x7BFF, fp16(65504f));
        assertEquals(0x3555, fp16(1f / 3f));
        // Tie between 1 (0x3C00, even) and 1+2^-10 (0x3C01): goes to even.
        assertEquals(0x3C00, fp16(1f + 0x1p-11f));
        // Tie between 1+2^-10 (odd) and 1+2^-9 (even): goes up.
        assertEquals(0x3C02, fp16(1f + 3 * 0x1p-11f));
        // Just above / below a tie.
        assertEquals(0x3C01, fp16(Math.nextUp(1f + 0x1p-11f)));
        assertEquals(0x3C01, fp16(Math.nextDown(1f + 3 * 0x1p-11f)));
        // Carry across a binade: 2 - 2^-11 is a tie between 0x3BFF (odd) and 2.0 (0x4000).
        assertEquals(0x4000, fp16(2f - 0x1p-11f));
    }

    @Test
    void fp16SubnormalBoundaries() {
        float minSub = 0x1p-24f;
        assertEquals(0x0001, fp16(minSub));
        assertEquals(0x8001, fp16(-minSub));
        assertEquals(0x0000, fp16(0x1p-25f), "half of min subnormal ties to even zero");
        assertEquals(0x8000, fp16(-0x1p-25f), "negative tiny rounds to -0");
        assertEquals(0x0001, fp16(Math.nextUp(0x1p-25f)));
        assertEquals(0x0000, fp16(Math.nextDown(0x1p-25f)));
        assertEquals(0x0002, fp16(1.5f * minSub), "tie 1 (odd) vs 2 (even)");
        assertEquals(0x0002, fp16(2.5f * minSub), "tie 2 (even) vs 3 (odd)");
        assertEquals(0x03FF, fp16(1023 * minSub), "max subnormal");
        assertEquals(0x0400, fp16(0x1p-14f), "min normal");
        assertEquals(0x0400, fp16(1023.5f * minSub), "tie max subnormal (odd) vs min normal");
        assertEquals(0x03FF, fp16(Math.nextDown(1023.5f * minSub)));
        assertEquals(0x0000, fp16(Float.MIN_VALUE));
        assertEquals(0x0000, fp16(Float.MIN_NORMAL));
        assertEquals((double) minSub, (double) HalfFloats.fp16ToFloat((short) 1));
        assertEquals(1023 * (double) minSub, (double) HalfFloats.fp16ToFloat((short) 0x3FF));
    }

    @Test
    void fp16OverflowAndSpecials() {
        assertEquals(0x7BFF, fp16(Math.nextDown(65520f)), "below midpoint stays max");
        assertEquals(0x7C00, fp16(65520f), "midpoint to 2^16 ties to even = Inf");
        assertEquals(0x7C00, fp16(65536f));
        assertEquals(0xFC00, fp16(-1e10f));
        assertEquals(0x7C00, fp16(Float.MAX_VALUE));
        assertEquals(0x7C00, fp16(Float.POSITIVE_INFINITY));
        assertEquals(0xFC00, fp16(Float.NEGATIVE_INFINITY));
        assertTrue(Float.isNaN(HalfFloats.fp16ToFloat(HalfFloats.floatToFp16(Float.NaN))));
        float negNaN = Float.intBitsToFloat(0xFF800001); // signalling, payload only in low bits
        int h = fp16(negNaN);
        assertEquals(0xFE00, h & 0xFE00, "negative quiet NaN");
        assertEquals(Float.POSITIVE_INFINITY, HalfFloats.fp16ToFloat((short) 0x7C00));
        assertEquals(Float.NEGATIVE_INFINITY, HalfFloats.fp16ToFloat((short) 0xFC00));
    }

    @Test
    void bf16TiesOverflowAndSpecials() {
        assertEquals(0x3F80, bf16(1f));
        // 1 + 2^-8 is a tie between 1 (even) and 1 + 2^-7 (odd).
        assertEquals(0x3F80, bf16(1f + 0x1p-8f));
        assertEquals(0x3F81, bf16(Math.nextUp(1f + 0x1p-8f)));
        // 1 + 3*2^-8 ties between 0x3F81 (odd) and 0x3F82 (even).
        assertEquals(0x3F82, bf16(1f + 3 * 0x1p-8f));
        assertEquals(0x7F7F, bf16(Float.intBitsToFloat(0x7F7F7FFF)), "below midpoint stays max");
        assertEquals(0x7F80, bf16(Float.intBitsToFloat(0x7F7F8000)), "midpoint ties to Inf");
        assertEquals(0x7F80, bf16(Float.MAX_VALUE));
        assertEquals(0xFF80, bf16(-Float.MAX_VALUE));
        assertEquals(0x7F80, bf16(Float.POSITIVE_INFINITY));
        assertEquals(0xFF80, bf16(Float.NEGATIVE_INFINITY));
        assertEquals(0x8000, bf16(-0f));
        assertEquals(0x0000, bf16(Float.MIN_VALUE), "2^-149 is below half a bf16 subnormal ulp");
        assertEquals(0x0001, bf16(Float.intBitsToFloat(0x00008001)));
        // NaN whose payload lies only in the low 16 bits must stay NaN (not become Inf).
        int h = bf16(Float.intBitsToFloat(0x7F800001));
        assertEquals(0x7FC0, h);
        assertEquals(0xFFC0, bf16(Float.intBitsToFloat(0xFF800001)));
    }

    // ---------------------------------------------------------------------------------------
    // Against the double-arithmetic reference
    // ---------------------------------------------------------------------------------------

    /** Floats whose low bits are 0, 1 or all ones: includes every midpoint and its ±1 ulp. */
    @Test
    void latticeAgainstReference() {
        int[] lows12 = {0x000, 0x001, 0xFFF, 0x800, 0x7FF};
        for (int hi = 0; hi < (0x7F800000 >>> 12); hi++) {
            for (int low : lows12) {
                int b = (hi << 12) | low;
                for (int s : new int[] {0, 0x80000000}) {
                    float x = Float.intBitsToFloat(b | s);
                    int got = fp16(x);
                    int want = refNarrow(x, FP16_MAGS, 0x7C00);
                    if (got != want) {
                        fail("fp16(" + x + " / 0x" + Integer.toHexString(b | s) + ") = 0x"
                                + Integer.toHexString(got) + ", want 0x" + Integer.toHexString(want));
                    }
                }
            }
        }
        int[] lows16 = {0x0000, 0x0001, 0xFFFF, 0x8000, 0x7FFF, 0x8001};
        for (int hi = 0; hi < 0x7F80; hi++) {
            for (int low : lows16) {
                int b = (hi << 16) | low;
                float x = Float.intBitsToFloat(b);
                int got = bf16(x);
                int want = refNarrow(x, BF16_MAGS, 0x7F80);
                if (got != want) {
                    fail("bf16(0x" + Integer.toHexString(b) + ") = 0x" + Integer.toHexString(got)
                            + ", want 0x" + Integer.toHexString(want));
                }
            }
        }
    }

    @Test
    void randomFloatsAgainstReference() {
        SplittableRandom rnd = new SplittableRandom(12345);
        for (int i = 0; i < 2_000_000; i++) {
            float x;
            if ((i & 1) == 0) {
                x = Float.intBitsToFloat(rnd.nextInt());          // full range, incl. NaN
            } else {
                // concentrated on the fp16 range, 2^-30 .. 2^17
                x = (float) (rnd.nextDouble(-1, 1) * Math.pow(2, rnd.nextInt(-30, 18)));
            }
            if (Float.isNaN(x)) {
                assertTrue(Float.isNaN(HalfFloats.fp16ToFloat(HalfFloats.floatToFp16(x))));
                assertTrue(Float.isNaN(HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(x))));
                continue;
            }
            int got = fp16(x);
            int want = refNarrow(x, FP16_MAGS, 0x7C00);
            if (got != want) {
                fail("fp16(" + x + ") = 0x" + Integer.toHexString(got) + ", want 0x"
                        + Integer.toHexString(want));
            }
            got = bf16(x);
            want = refNarrow(x, BF16_MAGS, 0x7F80);
            if (got != want) {
                fail("bf16(" + x + ") = 0x" + Integer.toHexString(got) + ", want 0x"
                        + Integer.toHexString(want));
            }
        }
    }
}
