package io.sparkcomms.collectives;

/**
 * Conversions between {@code float} and the two 16-bit floating point formats used by
 * accelerators: bfloat16 (1 sign, 8 exponent, 7 mantissa bits; the top half of a float) and
 * IEEE 754 binary16 "fp16" (1 sign, 5 exponent bits with bias 15, 10 mantissa bits).
 *
 * <p>Both narrowing conversions round to nearest, ties to even (the IEEE default), produce
 * infinity on overflow exactly as IEEE arithmetic does (a value rounds to infinity when it is
 * at least the midpoint between the largest finite value and the next power of two, with the
 * tie going to infinity because the largest finite value has an odd mantissa), keep infinities,
 * and turn every NaN into a quiet NaN of the same sign. Widening conversions are exact.
 *
 * <p>Java 17 has no {@code Float.floatToFloat16}; these are written with integer bit
 * manipulation only, so they are deterministic and cheap (no allocation, no branches on the
 * common path beyond the range classification).
 */
public final class HalfFloats {

    private HalfFloats() {
    }

    // ------------------------------------------------------------------------------------
    // bfloat16
    // ------------------------------------------------------------------------------------

    /** Widens a bfloat16 bit pattern to float. Exact: bf16 is the top 16 bits of a float. */
    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xFFFF) << 16);
    }

    /**
     * Narrows a float to bfloat16, round to nearest, ties to even.
     *
     * <p>Rounding argument: bf16 keeps the upper 16 bits of the float. Adding {@code 0x7FFF}
     * plus the lowest kept bit (the "is odd" bit) to the raw bits and truncating rounds the
     * discarded low 16 bits: a remainder above {@code 0x8000} always carries, exactly
     * {@code 0x8000} carries only when the kept part is odd (ties to even), below never.
     * A carry out of the mantissa increments the exponent, which is the correct next binade;
     * from the largest finite binade it reaches the all-ones exponent with zero mantissa,
     * i.e. infinity, which is IEEE overflow. The magnitude never exceeds {@code 0x7F807FFF}
     * so the sign bit is never disturbed. NaNs are handled separately (the add could turn a
     * NaN with only low payload bits into infinity).
     */
    public static short floatToBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if ((bits & 0x7FFFFFFF) > 0x7F800000) {
            // NaN: keep sign and the top payload bits, force the quiet bit (bf16 mantissa bit 6).
            return (short) ((bits >>> 16) | 0x0040);
        }
        int rounded = bits + 0x7FFF + ((bits >>> 16) & 1);
        return (short) (rounded >>> 16);
    }

    // ------------------------------------------------------------------------------------
    // IEEE binary16
    // ------------------------------------------------------------------------------------

    /** Widens an IEEE binary16 bit pattern to float. Exact for every input, NaN payload kept. */
    public static float fp16ToFloat(short bits) {
        int h = bits & 0xFFFF;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1F;
        int mant = h & 0x3FF;
        if (exp == 0) {
            // Zero or subnormal: value = mant * 2^-24, exactly representable as a normal float.
            float mag = mant * 0x1p-24f;
            return sign != 0 ? -mag : mag;
        }
        if (exp == 0x1F) {
            // Infinity (mant == 0) or NaN (payload shifted into the float mantissa, quiet bit kept).
            return Float.intBitsToFloat(sign | 0x7F800000 | (mant << 13));
        }
        // Normal: rebias exponent 15 -> 127, widen mantissa 10 -> 23 bits.
        return Float.intBitsToFloat(sign | ((exp - 15 + 127) << 23) | (mant << 13));
    }

    /**
     * Narrows a float to IEEE binary16, round to nearest, ties to even; subnormal results are
     * rounded correctly (no flush to zero), overflow gives infinity, NaN gives a quiet NaN with
     * the same sign.
     *
     * <p>Rounding argument. Normal results ({@code |f| >= 2^-14}): subtracting
     * {@code (127-15) << 23} rebiases the exponent in place; fp16 keeps the top 10 of the 23
     * float mantissa bits, so the discarded part is the low 13 bits, rounded with the same
     * "add 0xFFF + odd bit, truncate" trick as bf16; a carry moves to the next binade, and a
     * result at or above the fp16 infinity pattern {@code 0x7C00} is overflow, so it is
     * clamped to infinity (the trick itself rounds exactly as IEEE does at the boundary:
     * 65520, the midpoint between 65504 and 2^16, ties to the even pattern 0x7C00).
     * Subnormal results ({@code |f| < 2^-14}): the fp16 value is {@code m * 2^-24} with an
     * integer m in [0, 1024]; m is the float's 24-bit significand shifted right by
     * {@code shift >= 14}, rounded by comparing the shifted-out remainder with the half.
     * m == 1024 is the pattern of the smallest normal, which is the correct result.
     */
    public static short floatToFp16(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7FFFFFFF;
        if (abs > 0x7F800000) {
            // NaN: quiet NaN, same sign, keep the top payload bits.
            return (short) (sign | 0x7E00 | ((abs >>> 13) & 0x3FF));
        }
        if (abs >= 0x38800000) { // |f| >= 2^-14: normal (or overflow)
            int r = abs - ((127 - 15) << 23);
            r += 0xFFF + ((r >>> 13) & 1);
            r >>>= 13;
            if (r >= 0x7C00) {
                r = 0x7C00; // overflow (also the path for +-Inf input)
            }
            return (short) (sign | r);
        }
        // |f| < 2^-14: fp16 subnormal (or zero). Result m = round_ne(|f| / 2^-24).
        if (abs < 0x00800000) {
            return (short) sign; // zero or float subnormal (< 2^-126): rounds to (signed) zero
        }
        int e = (abs >>> 23) - 127;             // unbiased exponent, e <= -15 here
        int sig = (abs & 0x7FFFFF) | 0x800000;  // |f| = sig * 2^(e-23)
        // |f| / 2^-24 = sig * 2^(e+1) = sig >> shift, shift = -1 - e >= 14
        int shift = -1 - e;
        if (shift > 25) {
            return (short) sign;                // |f| < 2^-26 < half of 2^-24: rounds to zero
        }
        int q = sig >>> shift;
        int rem = sig & ((1 << shift) - 1);
        int half = 1 << (shift - 1);
        if (rem > half || (rem == half && (q & 1) != 0)) {
            q++;                                // round up; q == 1024 is the smallest normal
        }
        return (short) (sign | q);
    }
}
