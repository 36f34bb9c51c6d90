package io.sparkcomms.collectives.lp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

class Fp8CodecTest {

    // ---------------------------------------------------------------------------------------
    // Independent reference
    // ---------------------------------------------------------------------------------------

    /** Decoding straight from the format definition, in double. */
    static double refDecode(int code, Fp8Format f) {
        boolean fn = f == Fp8Format.E4M3FN;
        if (fn ? (code & 0x7F) == 0x7F : code == 0x80) {
            return Double.NaN;
        }
        int bias = fn ? 7 : 8;
        int e = (code >> 3) & 0xF;
        int m = code & 7;
        double v = e == 0 ? m / 8.0 * Math.pow(2, 1 - bias) : (1 + m / 8.0) * Math.pow(2, e - bias);
        return (code & 0x80) != 0 ? -v : v;
    }

    /** refDecode tabulated per format (by ordinal). */
    private static final double[][] REF = new double[Fp8Format.values().length][256];

    static {
        for (Fp8Format f : Fp8Format.values()) {
            for (int c = 0; c < 256; c++) {
                REF[f.ordinal()][c] = refDecode(c, f);
            }
        }
    }

    /**
     * Brute force over all 256 codes: the finite code nearest to x (exact double distances),
     * ties to the code with even mantissa, zero with the sign of x where a signed zero exists.
     * Values beyond max are nearest to ±max, which is the saturation rule. NaN/Inf -> NaN code.
     */
    static int refEncode(float x, Fp8Format f) {
        if (Float.isNaN(x) || Float.isInfinite(x)) {
            return f.nanCode() & 0xFF;
        }
        double[] ref = REF[f.ordinal()];
        if (Math.abs((double) x) > 1024) {
            // Far beyond every finite value (max <= 448): the nearest is the largest-magnitude
            // value of x's sign. (Needed because double distances to huge x are not exact.)
            int best = -1;
            for (int c = 0; c < 256; c++) {
                double v = ref[c];
                boolean sameSign = (v < 0) == (x < 0);
                if (!Double.isNaN(v) && sameSign
                        && (best < 0 || Math.abs(v) > Math.abs(ref[best]))) {
                    best = c;
                }
            }
            return best;
        }
        boolean neg = Float.floatToRawIntBits(x) < 0;
        double xd = x;
        int best = -1;
        double bestD = Double.POSITIVE_INFINITY;
        for (int c = 0; c < 256; c++) {
            double v = ref[c];
            if (Double.isNaN(v)) {
                continue;
            }
            double d = Math.abs(xd - v);
            if (d < bestD) {
                best = c;
                bestD = d;
            } else if (d == bestD) {
                double bv = ref[best];
                if (v == 0 && bv == 0) {
                    // +0 vs -0: take the one whose sign matches x
                    if (((c & 0x80) != 0) == neg) {
                        best = c;
                    }
                } else if ((c & 1) == 0 && (best & 1) != 0) {
                    best = c;
                }
            }
        }
        return best;
    }

    private static int enc(float x, Fp8Format f) {
        return Fp8Codec.encode(x, f) & 0xFF;
    }

    private static void check(float x, Fp8Format f) {
        int got = enc(x, f);
        int want = refEncode(x, f);
        if (got != want) {
            fail(f + ": encode(" + x + " / 0x" + Integer.toHexString(Float.floatToRawIntBits(x))
                    + ") = 0x" + Integer.toHexString(got) + ", want 0x" + Integer.toHexString(want));
        }
    }

    // ---------------------------------------------------------------------------------------
    // Format
    // ---------------------------------------------------------------------------------------

    @Test
    void formatConstantsAndParse() {
        assertEquals(448f, Fp8Format.E4M3FN.maxFinite());
        assertEquals(240f, Fp8Format.E4M3FNUZ.maxFinite());
        assertEquals((byte) 0x7F, Fp8Format.E4M3FN.nanCode());
        assertEquals((byte) 0x80, Fp8Format.E4M3FNUZ.nanCode());
        assertEquals(7, Fp8Format.E4M3FN.exponentBias());
        assertEquals(8, Fp8Format.E4M3FNUZ.exponentBias());
        assertSame(Fp8Format.E4M3FN, Fp8Format.parse("e4m3fn"));
        assertSame(Fp8Format.E4M3FN, Fp8Format.parse("E4M3FN"));
        assertSame(Fp8Format.E4M3FN, Fp8Format.parse("fn"));
        assertSame(Fp8Format.E4M3FNUZ, Fp8Format.parse("e4m3fnuz"));
        assertSame(Fp8Format.E4M3FNUZ, Fp8Format.parse("FNUZ"));
        assertSame(Fp8Format.E4M3FNUZ, Fp8Format.parse(" E4M3FnUz "));
        IllegalArgumentException ex =
                assertThrows(IllegalArgumentException.class, () -> Fp8Format.parse("e5m2"));
        assertTrue(ex.getMessage().contains("e5m2"));
        assertThrows(IllegalArgumentException.class, () -> Fp8Format.parse(""));
        assertThrows(IllegalArgumentException.class, () -> Fp8Format.parse(null));
    }

    // ---------------------------------------------------------------------------------------
    // Decode and round trip
    // ---------------------------------------------------------------------------------------

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void allCodesDecodeAndRoundTrip(Fp8Format f) {
        int nans = 0;
        for (int c = 0; c < 256; c++) {
            float v = Fp8Codec.decode((byte) c, f);
            double ref = refDecode(c, f);
            if (Double.isNaN(ref)) {
                nans++;
                assertTrue(Float.isNaN(v), "code " + c);
                assertEquals(f.nanCode(), Fp8Codec.encode(v, f), "NaN re-encodes to NaN code");
            } else {
                assertEquals(ref, (double) v, "decode code 0x" + Integer.toHexString(c));
                assertEquals(c, enc(v, f), "round trip code 0x" + Integer.toHexString(c));
            }
        }
        assertEquals(f == Fp8Format.E4M3FN ? 2 : 1, nans);
    }

    @Test
    void knownValues() {
        Fp8Format fn = Fp8Format.E4M3FN;
        Fp8Format uz = Fp8Format.E4M3FNUZ;
        assertEquals(0x7E, enc(448f, fn));
        assertEquals(0xFE, enc(-448f, fn));
        assertEquals(0x01, enc(0x1p-9f, fn));
        assertEquals(0x38, enc(1f, fn));
        assertEquals(0x08, enc(0x1p-6f, fn), "min normal");
        assertEquals(448f, Fp8Codec.decode((byte) 0x7E, fn));
        assertEquals(0x1p-9f, Fp8Codec.decode((byte) 0x01, fn));
        assertTrue(Float.isNaN(Fp8Codec.decode((byte) 0x7F, fn)));
        assertTrue(Float.isNaN(Fp8Codec.decode((byte) 0xFF, fn)));
        assertEquals(-0f, Fp8Codec.decode((byte) 0x80, fn));
        assertEquals(0x80, enc(-0f, fn), "E4M3FN keeps -0");
        assertEquals(0x80, enc(-0x1p-11f, fn), "negative tiny -> -0 in E4M3FN");

        assertEquals(0x7F, enc(240f, uz));
        assertEquals(0xFF, enc(-240f, uz));
        assertEquals(0x01, enc(0x1p-10f, uz));
        assertEquals(0x40, enc(1f, uz));
        assertEquals(0x08, enc(0x1p-7f, uz), "min normal");
        assertEquals(240f, Fp8Codec.decode((byte) 0x7F, uz));
        assertEquals(-240f, Fp8Codec.decode((byte) 0xFF, uz));
        assertEquals(0x1p-10f, Fp8Codec.decode((byte) 0x01, uz));
        assertTrue(Float.isNaN(Fp8Codec.decode((byte) 0x80, uz)));
        assertEquals(0x00, enc(-0f, uz), "E4M3FNUZ has no -0 (0x80 is NaN)");
        assertEquals(0x00, enc(-0x1p-12f, uz), "negative tiny -> +0 in E4M3FNUZ");
    }

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void specialsSaturationAndSubnormals(Fp8Format f) {
        int nan = f.nanCode() & 0xFF;
        int maxCode = f == Fp8Format.E4M3FN ? 0x7E : 0x7F;
        float max = f.maxFinite();
        float minSub = Math.scalb(1f, -2 - f.exponentBias());
        assertEquals(nan, enc(Float.NaN, f));
        assertEquals(nan, enc(Float.intBitsToFloat(0xFFC00001), f));
        assertEquals(nan, enc(Float.POSITIVE_INFINITY, f), "no Inf: +Inf -> NaN code");
        assertEquals(nan, enc(Float.NEGATIVE_INFINITY, f), "no Inf: -Inf -> NaN code");
        // Saturation: everything finite at/above max (incl. the 1.0625*max boundary) -> max.
        for (float x : new float[] {max, Math.nextUp(max), max * 1.03125f, max * 1.0625f,
                Math.nextDown(max * 1.0625f), Math.nextUp(max * 1.0625f), 1e6f, Float.MAX_VALUE}) {
            assertEquals(maxCode, enc(x, f), "saturate " + x);
            assertEquals(maxCode | 0x80, enc(-x, f), "saturate " + -x);
        }
        // Just below max: midpoint between max and its predecessor (ulp = max/15 or /14) ...
        float pred = Fp8Codec.decode((byte) (maxCode - 1), f);
        float mid = (pred + max) / 2;
        assertEquals(maxCode - 1 + ((maxCode - 1) % 2 == 0 ? 0 : 1), enc(mid, f), "tie at top");
        // Subnormals.
        assertEquals(0x01, enc(minSub, f));
        assertEquals(0x00, enc(minSub / 2, f), "half of min subnormal ties to zero (even)");
        assertEquals(0x01, enc(Math.nextUp(minSub / 2), f));
        assertEquals(0x00, enc(Math.nextDown(minSub / 2), f));
        assertEquals(0x02, enc(minSub * 1.5f, f), "tie 1 (odd) vs 2 (even)");
        assertEquals(0x02, enc(minSub * 2.5f, f), "tie 2 (even) vs 3 (odd)");
        assertEquals(0x08, enc(minSub * 7.5f, f), "tie max subnormal (odd) vs min normal");
        assertEquals(0x00, enc(Float.MIN_VALUE, f));
        assertEquals(0x00, enc(Float.MIN_NORMAL, f));
        assertEquals(f == Fp8Format.E4M3FN ? 0x80 : 0x00, enc(-Float.MIN_VALUE, f));
    }

    // ---------------------------------------------------------------------------------------
    // Encode against the brute-force reference
    // ---------------------------------------------------------------------------------------

    /** Every representable value, every midpoint, each ±1 and ±2 ulp, both signs, plus extremes. */
    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void encodeAroundAllRepresentablesAndMidpoints(Fp8Format f) {
        List<Float> pos = new ArrayList<>();
        for (int c = 0; c < 0x80; c++) {
            float v = Fp8Codec.decode((byte) c, f);
            if (!Float.isNaN(v)) {
                pos.add(v);
            }
        }
        List<Float> probes = new ArrayList<>();
        for (int i = 0; i < pos.size(); i++) {
            probes.add(pos.get(i));
            if (i + 1 < pos.size()) {
                probes.add((pos.get(i) + pos.get(i + 1)) / 2); // exact midpoint in float
            }
        }
        float max = f.maxFinite();
        probes.add(max * 1.0625f);
        probes.add(max * 1.125f);
        probes.add(Float.MAX_VALUE);
        probes.add(Float.MIN_VALUE);
        probes.add(Float.MIN_NORMAL);
        float minSub = Math.scalb(1f, -2 - f.exponentBias());
        probes.add(minSub / 2);
        probes.add(minSub / 4);
        int checked = 0;
        for (float p : probes) {
            float[] around = {p, Math.nextUp(p), Math.nextDown(p), Math.nextUp(Math.nextUp(p)),
                    Math.nextDown(Math.nextDown(p))};
            for (float x : around) {
                check(x, f);
                check(-x, f);
                checked += 2;
            }
        }
        check(0f, f);
        check(-0f, f);
        assertTrue(checked > 1000);
    }

    /**
     * A lattice over the whole float range: every float whose low 16 bits are one of a few
     * patterns. FP8 midpoints have at least 19 trailing zero bits, so this includes every
     * midpoint, every representable, and their ±1 ulp neighbours, in every binade.
     */
    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void encodeLatticeAgainstReference(Fp8Format f) {
        int[] lows = {0x0000, 0x0001, 0xFFFF, 0x8000};
        for (int hi = 0; hi <= 0x7F80; hi++) {
            for (int low : lows) {
                int b = (hi << 16) | low;
                check(Float.intBitsToFloat(b), f);
                check(Float.intBitsToFloat(b | 0x80000000), f);
            }
        }
    }

    @ParameterizedTest
    @EnumSource(Fp8Format.class)
    void encodeRandomAgainstReference(Fp8Format f) {
        SplittableRandom rnd = new SplittableRandom(f.ordinal() * 7919L + 1);
        for (int i = 0; i < 2_000_000; i++) {
            float x;
            switch (i % 3) {
                case 0:
                    x = Float.intBitsToFloat(rnd.nextInt()); // any bits
                    break;
                case 1: // the FP8 range and a bit beyond, log-uniform
                    x = (float) (rnd.nextDouble(-1, 1) * Math.pow(2, rnd.nextInt(-14, 11)));
                    break;
                default: // uniform in [-600, 600]
                    x = (float) rnd.nextDouble(-600, 600);
                    break;
            }
            check(x, f);
        }
    }

    @Test
    void decodeTableIsShared() {
        // The package-private table accessor returns the values decode() uses.
        for (Fp8Format f : Fp8Format.values()) {
            float[] t = Fp8Codec.table(f);
            assertEquals(256, t.length);
            for (int c = 0; c < 256; c++) {
                float d = Fp8Codec.decode((byte) c, f);
                assertEquals(Float.floatToRawIntBits(d), Float.floatToRawIntBits(t[c]));
            }
        }
        assertFalse(Float.isNaN(Fp8Codec.decode((byte) 0xFF, Fp8Format.E4M3FNUZ)));
    }
}
