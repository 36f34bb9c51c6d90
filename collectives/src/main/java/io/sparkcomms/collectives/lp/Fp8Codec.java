package io.sparkcomms.collectives.lp;

/**
 * Scalar float &lt;-&gt; FP8 (E4M3) conversion, the bit-exact reference for every backend.
 *
 * <h2>Encoding rules</h2>
 * <ul>
 *   <li>Round to nearest, ties to even (the tie goes to the code with an even, i.e. zero, last
 *       mantissa bit), with correct subnormals (no flush to zero).</li>
 *   <li>Finite values whose magnitude is at or above {@link Fp8Format#maxFinite()} saturate to
 *       ±max. (Under plain IEEE rounding, values below the midpoint to the next, non-existent,
 *       binade step would round to max anyway, so saturation only changes what would have
 *       overflowed.) This matches the "satfinite" conversions of CUDA and HIP.</li>
 *   <li>These formats have <b>no infinity</b>: ±Inf and every NaN encode to
 *       {@link Fp8Format#nanCode()} (0x7F for E4M3FN, 0x80 for E4M3FNUZ). The sign of a NaN is
 *       not kept.</li>
 *   <li>Zero keeps its sign in E4M3FN (-0 is 0x80). E4M3FNUZ has a single zero: -0.0f and
 *       negative values that round to zero encode to 0x00, never 0x80 (which is NaN).</li>
 * </ul>
 *
 * <h2>Decoding</h2>
 * Exact (every FP8 value is a float), via a 256-entry table per format. E4M3FN decodes 0x7F and
 * 0xFF to NaN; E4M3FNUZ decodes only 0x80 to NaN.
 */
public final class Fp8Codec {

    private Fp8Codec() {
    }

    /** Decode tables indexed by {@code Fp8Format.ordinal()} then by unsigned code. */
    private static final float[][] DECODE = new float[Fp8Format.values().length][];

    static {
        for (Fp8Format f : Fp8Format.values()) {
            float[] t = new float[256];
            for (int c = 0; c < 256; c++) {
                t[c] = decodeSlow(c, f);
            }
            DECODE[f.ordinal()] = t;
        }
    }

    /** Field-by-field decoding used to build the tables. */
    private static float decodeSlow(int code, Fp8Format f) {
        if (f.hasNegativeZero ? (code & 0x7F) == 0x7F : code == 0x80) {
            return Float.NaN;
        }
        int exp = (code >>> 3) & 0xF;
        int mant = code & 0x7;
        float mag;
        if (exp == 0) {
            mag = Math.scalb((float) mant, 1 - f.exponentBias() - 3);           // mant * 2^(1-bias-3)
        } else {
            mag = Math.scalb((float) (8 + mant), exp - f.exponentBias() - 3);   // 1.mmm * 2^(exp-bias)
        }
        return (code & 0x80) != 0 ? -mag : mag;
    }

    /**
     * The decode table of a format, shared and NOT to be modified: package-private so that hot
     * loops (BlockQuantizer) can index it directly.
     */
    static float[] table(Fp8Format f) {
        return DECODE[f.ordinal()];
    }

    /** Decodes one FP8 code; exact. */
    public static float decode(byte b, Fp8Format f) {
        return DECODE[f.ordinal()][b & 0xFF];
    }

    /**
     * Encodes a float to FP8: round to nearest even, saturating finite overflow to ±max, ±Inf and
     * NaN to the format's NaN code, -0 to 0x00 in E4M3FNUZ. See the class comment.
     *
     * <p>Rounding argument (exact integer / IEEE float operations only):
     * <ul>
     *   <li>Saturation: the magnitude bits are clamped to those of max before rounding. Float bit
     *       patterns of non-negative values order like the values, and max is representable, so
     *       everything at or above max becomes exactly max.</li>
     *   <li>Normal results, {@code 2^(1-bias) <= |x| <= max}: subtracting
     *       {@code (127-bias) << 23} rebiases the exponent in place; FP8 keeps the top 3 of the 23
     *       mantissa bits, so the low 20 bits are discarded. Adding {@code 0x7FFFF} plus the
     *       lowest kept bit and truncating rounds to nearest with ties to even (a remainder above
     *       half always carries, exactly half only when the kept part is odd); a mantissa carry
     *       moves into the exponent, the correct next binade. Since {@code |x| <= max} and max is
     *       representable, monotone rounding never goes past the max code.</li>
     *   <li>Subnormal results, {@code |x| < 2^(1-bias)}: FP8 subnormals are the multiples of
     *       {@code u = 2^(-2-bias)}. Adding {@code M = 2^(21-bias)}, whose float ulp is exactly u,
     *       makes the IEEE float adder round |x| to a multiple of u, to nearest, ties to even;
     *       the sum stays in M's binade ({@code |x| < 8u}), so its raw bits minus M's raw bits are the
     *       multiple m in [0, 8]. m == 8 is the code of the smallest normal, the right answer
     *       there. Float subnormal inputs are handled by the same addition.</li>
     * </ul>
     */
    public static byte encode(float x, Fp8Format f) {
        int bits = Float.floatToRawIntBits(x);
        int abs = bits & 0x7FFFFFFF;
        if (abs >= 0x7F800000) {
            return f.nanCode();                              // NaN or +-Inf: no Inf in E4M3
        }
        int mag;
        if (abs >= f.minNormalBits) {
            int r = Math.min(abs, f.maxFiniteBits) - f.rebias; // saturate, then rebias exponent
            r += 0x7FFFF + ((r >>> 20) & 1);                   // round off 20 bits, ties to even
            mag = r >>> 20;
        } else {
            mag = Float.floatToRawIntBits(Float.intBitsToFloat(abs) + f.subnormalMagic)
                    - f.subnormalMagicBits;
        }
        // Sign bit, except that E4M3FNUZ has a single zero (0x80 is its NaN).
        int sign = (mag != 0 || f.hasNegativeZero) ? (bits >>> 24) & 0x80 : 0;
        return (byte) (sign | mag);
    }
}
