package io.sparkcomms.collectives.lp;

import java.util.Locale;

/**
 * The 8-bit floating point formats with 4 exponent and 3 mantissa bits ("E4M3") supported by
 * the low-precision collectives. Neither has infinities; both saturate in {@link Fp8Codec}.
 *
 * <ul>
 *   <li>{@link #E4M3FN}: OCP / NVIDIA (Hopper {@code __nv_fp8_e4m3}) format. Exponent bias 7,
 *       largest finite 448 ({@code 0x7E}), smallest subnormal 2^-9 ({@code 0x01}). Has +0
 *       ({@code 0x00}) and -0 ({@code 0x80}); NaN is {@code 0x7F} and {@code 0xFF} (S.1111.111).</li>
 *   <li>{@link #E4M3FNUZ}: AMD (MI300 {@code __hip_fp8_e4m3_fnuz}) / Graphcore format. Exponent
 *       bias 8, largest finite 240 ({@code 0x7F}), smallest subnormal 2^-10 ({@code 0x01}).
 *       Only one zero ({@code 0x00}); {@code 0x80}, the would-be negative zero, is the only
 *       NaN. Every other code is finite.</li>
 * </ul>
 */
public enum Fp8Format {
    /** 4 exponent bits (bias 7), 3 mantissa bits, max 448, NaN 0x7F/0xFF, signed zeros. */
    E4M3FN(7, 448.0f, (byte) 0x7F, 0x7E, true),
    /** 4 exponent bits (bias 8), 3 mantissa bits, max 240, NaN 0x80 only, unsigned zero. */
    E4M3FNUZ(8, 240.0f, (byte) 0x80, 0x7F, false);

    private final int bias;
    private final float maxFinite;
    private final byte nanCode;
    /** Magnitude code (sign bit clear) of the largest finite value. */
    final int maxCode;
    /** Whether 0x80 is negative zero (true) or NaN (false). */
    final boolean hasNegativeZero;
    /** Raw float bits of {@link #maxFinite()}. */
    final int maxFiniteBits;
    /** Raw float bits of the smallest normal value, 2^(1 - bias). */
    final int minNormalBits;
    /** Subtracted from raw float bits to rebias the exponent from 127 to this format's bias. */
    final int rebias;
    /** 2^(21 - bias): its float ulp is the subnormal unit 2^(-2 - bias) (see Fp8Codec.encode). */
    final float subnormalMagic;
    /** Raw float bits of {@link #subnormalMagic}. */
    final int subnormalMagicBits;

    Fp8Format(int bias, float maxFinite, byte nanCode, int maxCode, boolean hasNegativeZero) {
        this.bias = bias;
        this.maxFinite = maxFinite;
        this.nanCode = nanCode;
        this.maxCode = maxCode;
        this.hasNegativeZero = hasNegativeZero;
        this.maxFiniteBits = Float.floatToRawIntBits(maxFinite);
        this.minNormalBits = Float.floatToRawIntBits(Math.scalb(1.0f, 1 - bias));
        this.rebias = (127 - bias) << 23;
        this.subnormalMagic = Math.scalb(1.0f, 21 - bias);
        this.subnormalMagicBits = Float.floatToRawIntBits(subnormalMagic);
    }

    /** Largest finite value: 448 for E4M3FN, 240 for E4M3FNUZ. */
    public float maxFinite() {
        return maxFinite;
    }

    /**
     * The canonical NaN code the encoder produces: {@code 0x7F} for E4M3FN (where {@code 0xFF}
     * also decodes as NaN), {@code 0x80} for E4M3FNUZ (the only NaN).
     */
    public byte nanCode() {
        return nanCode;
    }

    /** Exponent bias: 7 for E4M3FN, 8 for E4M3FNUZ. */
    public int exponentBias() {
        return bias;
    }

    /**
     * Parses a format name, case-insensitively: {@code "e4m3fn"} or {@code "fn"} for
     * {@link #E4M3FN}, {@code "e4m3fnuz"} or {@code "fnuz"} for {@link #E4M3FNUZ}. Surrounding
     * whitespace is ignored.
     *
     * @throws IllegalArgumentException for null or any other string
     */
    public static Fp8Format parse(String s) {
        if (s != null) {
            switch (s.trim().toLowerCase(Locale.ROOT)) {
                case "e4m3fn":
                case "fn":
                    return E4M3FN;
                case "e4m3fnuz":
                case "fnuz":
                    return E4M3FNUZ;
                default:
                    break;
            }
        }
        throw new IllegalArgumentException("Unknown FP8 format '" + s
                + "': expected one of e4m3fn (fn), e4m3fnuz (fnuz), case-insensitive");
    }
}
