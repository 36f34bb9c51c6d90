// FP8 (E4M3FN / E4M3FNUZ) codec and per-block scaled quantization, bit-exact with the Java
// reference (collectives/.../lp/Fp8Codec.java and BlockQuantizer.java):
//   - encode: round to nearest even, correct subnormals, finite overflow saturates to +-max,
//     +-Inf and NaN -> the format's NaN code (0x7F for FN, 0x80 for FNUZ), FNUZ has one zero;
//   - block scale 2^e, e = smallest integer with amax(finite) <= max * 2^e, clamped to
//     [-126, 127], e = 0 for an all-zero (or all non-finite) block;
//   - wire layout of a run of n elements: n code bytes | zero pad to 4 | ceil(n/bs) float32
//     scales (little-endian: every target here is little-endian).
// Integer arithmetic only (no reliance on the FPU's denormal mode), except the two exact
// multiplications x * 2^-e and decode(q) * 2^e, which the reference also performs in float.
#pragma once

#include "../include/sparkcomms.h"
#include "dda_types.cuh"

// Format codes SC_FP8_E4M3FN (0) / SC_FP8_E4M3FNUZ (1) come from sparkcomms.h (= Java Fp8Format.ordinal()).

// Everything about a format the codec needs, passed by value.
struct ScFp8 {
  uint32_t max_bits;     // float bits of the largest finite value (448 or 240)
  uint32_t min_normal;   // float bits of 2^(1-bias)
  uint32_t rebias;       // (127 - bias) << 23
  uint32_t max_mant;     // mantissa field of max (for the exact scale exponent)
  int max_exp;           // unbiased exponent of max
  int bias;              // 7 or 8
  int neg_zero;          // 1: 0x80 is -0 (FN); 0: 0x80 is NaN (FNUZ)
  uint32_t nan_code;     // 0x7F or 0x80
};

static inline ScFp8 sc_fp8_format(int fmt) {
  ScFp8 f;
  if (fmt == SC_FP8_E4M3FNUZ) {
    f.bias = 8; f.max_bits = 0x43700000u; /* 240 */ f.nan_code = 0x80u; f.neg_zero = 0;
  } else {
    f.bias = 7; f.max_bits = 0x43E00000u; /* 448 */ f.nan_code = 0x7Fu; f.neg_zero = 1;
  }
  f.min_normal = (uint32_t)(127 + 1 - f.bias) << 23;
  f.rebias = (uint32_t)(127 - f.bias) << 23;
  f.max_mant = f.max_bits & 0x7FFFFFu;
  f.max_exp = (int)(f.max_bits >> 23) - 127;
  return f;
}

// Encoded size of a run of n elements with block size bs.
static inline size_t sc_lp_run_bytes(size_t n, size_t bs) { return ((n + 3) & ~(size_t)3) + 4 * ((n + bs - 1) / bs); }

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)

// float -> FP8 code (Fp8Codec.encode).
SC_DEV uint32_t sc_fp8_encode(float x, const ScFp8& f) {
  const uint32_t bits = __float_as_uint(x);
  const uint32_t a = bits & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return f.nan_code;
  uint32_t mag;
  if (a >= f.min_normal) {
    uint32_t r = (a < f.max_bits ? a : f.max_bits) - f.rebias;
    r += 0x7FFFFu + ((r >> 20) & 1u);
    mag = r >> 20;
  } else {
    // Subnormal result: m = round_half_even(|x| / 2^(-2-bias)), from the float's fields.
    const uint32_t e = a >> 23;
    const uint32_t mant = (a & 0x7FFFFFu) | (e ? 0x800000u : 0u);
    const int s = 148 - f.bias - (int)(e ? e : 1u);  // >= 21
    if (s >= 32) {
      mag = 0;  // mant < 2^24 <= half
    } else {
      uint32_t q = mant >> s;
      const uint32_t rem = mant & ((1u << s) - 1u), half = 1u << (s - 1);
      if (rem > half || (rem == half && (q & 1u))) ++q;
      mag = q;
    }
  }
  const uint32_t sign = (mag != 0 || f.neg_zero) ? (bits >> 24) & 0x80u : 0u;
  return sign | mag;
}

// FP8 code -> float (Fp8Codec.decode; exact). NaN codes give a quiet NaN.
SC_DEV float sc_fp8_decode(uint32_t code, const ScFp8& f) {
  code &= 0xFFu;
  if (f.neg_zero ? (code & 0x7Fu) == 0x7Fu : code == 0x80u) return __uint_as_float(0x7FC00000u);
  const uint32_t sign = (code & 0x80u) << 24;
  const uint32_t ex = (code >> 3) & 0xFu, m = code & 7u;
  if (ex == 0) {
    // m * 2^(-2-bias): exact in float (m < 8).
    const float u = __uint_as_float((uint32_t)(127 - 2 - f.bias) << 23);
    return __uint_as_float(__float_as_uint((float)m * u) | sign);
  }
  return __uint_as_float(sign | ((ex + 127u - (uint32_t)f.bias) << 23) | (m << 20));
}

// Scale exponent of a block from the float bits of its amax (positive finite, or 0).
SC_DEV int sc_lp_scale_exp(uint32_t amax_bits, const ScFp8& f) {
  if (amax_bits == 0) return 0;
  int ea;
  uint32_t mant;
  if (amax_bits >= 0x800000u) {
    ea = (int)(amax_bits >> 23) - 127;
    mant = amax_bits & 0x7FFFFFu;
  } else {  // float subnormal: normalize
    const int p = 31 - __clz((int)amax_bits);
    ea = p - 149;
    mant = (amax_bits << (23 - p)) & 0x7FFFFFu;
  }
  int e = ea - f.max_exp + (mant > f.max_mant ? 1 : 0);
  return e < -126 ? -126 : (e > 127 ? 127 : e);
}
// 2^k as a float for k in [-127, 127] (2^-127 is the subnormal 0x00400000).
SC_DEV float sc_pow2f(int k) { return k >= -126 ? __uint_as_float((uint32_t)(k + 127) << 23) : __uint_as_float(0x00400000u); }

// Max over the L lanes of an aligned lane group (L a power of two <= 32); every lane of the warp
// must call it (full-mask shuffles).
SC_DEV uint32_t sc_lane_group_max(uint32_t v, int L) {
  for (int m = L >> 1; m >= 1; m >>= 1) {
#if SC_HIP
    const uint32_t o = (uint32_t)__shfl_xor((int)v, m, 32);
#else
    const uint32_t o = __shfl_xor_sync(0xFFFFFFFFu, v, m, 32);
#endif
    v = o > v ? o : v;
  }
  return v;
}
// Max over the 32 lanes of a group (a warp on CUDA, half a wavefront on gfx9).
SC_DEV uint32_t sc_group_max(uint32_t v) { return sc_lane_group_max(v, 32); }

// The generic path's walk: one 32-lane group per block; group g takes blocks g, g + G, ...
struct ScLpGroups {
  int lane;
  size_t t0, stride, nb;
  SC_DEV ScLpGroups(size_t n, size_t bs)
      : lane((int)(threadIdx.x & 31)),
        t0(((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5),
        stride(((size_t)gridDim.x * blockDim.x) >> 5),
        nb((n + bs - 1) / bs) {}
};

// Loads that bypass L1 for staging memory written by peers during the kernel.
SC_DEV uint32_t sc_ldcg_u32(const uint32_t* p) {
#if SC_HIP
  return *(const volatile uint32_t*)p;
#else
  return __ldcg(p);
#endif
}
SC_DEV float sc_ldcg_f32(const float* p) {
#if SC_HIP
  return *(const volatile float*)p;
#else
  return __ldcg(p);
#endif
}

// Four consecutive elements [i, i+4) of a run of n elements (beyond n: 0), as floats.
template <int DT>
SC_DEV void sc_lp_load4(const typename ScType<DT>::T* p, size_t i, size_t n, bool al, float (&v)[4]) {
  if (DT == SC_DT_F32) {
    const float* q = (const float*)p;
    if (al && i + 4 <= n) {
      const float4 x = *(const float4*)(q + i);
      v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
      return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = i + k < n ? q[i + k] : 0.0f;
  } else {
    const uint16_t* q = (const uint16_t*)p;
    if (al && i + 4 <= n) {
      const uint2 x = *(const uint2*)(q + i);
      v[0] = sc_bf2f((uint16_t)(x.x & 0xFFFFu)); v[1] = sc_bf2f((uint16_t)(x.x >> 16));
      v[2] = sc_bf2f((uint16_t)(x.y & 0xFFFFu)); v[3] = sc_bf2f((uint16_t)(x.y >> 16));
      return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = i + k < n ? sc_bf2f(q[i + k]) : 0.0f;
  }
}
// Stores the first min(4, n - i) of four floats at [i, i+4); bf16 rounded to nearest even.
template <int DT>
SC_DEV void sc_lp_store4(typename ScType<DT>::T* p, size_t i, size_t n, bool al, const float (&v)[4]) {
  if (DT == SC_DT_F32) {
    float* q = (float*)p;
    if (al && i + 4 <= n) {
      *(float4*)(q + i) = make_float4(v[0], v[1], v[2], v[3]);
      return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i + k < n) q[i + k] = v[k];
  } else {
    uint16_t* q = (uint16_t*)p;
    if (al && i + 4 <= n) {
      uint2 x;
      x.x = (uint32_t)sc_f2bf(v[0]) | ((uint32_t)sc_f2bf(v[1]) << 16);
      x.y = (uint32_t)sc_f2bf(v[2]) | ((uint32_t)sc_f2bf(v[3]) << 16);
      *(uint2*)(q + i) = x;
      return;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      if (i + k < n) q[i + k] = sc_f2bf(v[k]);
  }
}
template <int DT> SC_DEV bool sc_lp_aligned(const void* p) { return ((uintptr_t)p & (DT == SC_DT_F32 ? 15u : 7u)) == 0; }

SC_DEV uint32_t sc_lp_amax4(const float (&v)[4], uint32_t m) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t a = __float_as_uint(v[k]) & 0x7FFFFFFFu;
    if (a < 0x7F800000u && a > m) m = a;  // finite only (NaN / Inf ignored)
  }
  return m;
}
SC_DEV uint32_t sc_lp_encode4(const float (&v)[4], float inv, const ScFp8& f) {
  uint32_t w = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) w |= sc_fp8_encode(v[k] * inv, f) << (8 * k);
  return w;
}

// Source of one quantization block: either an input buffer (DT elements) or the FP32 sum of the
// dequantized blocks of several runs (the allreduce's reduce step). A group of 32 lanes handles a
// block; lane l handles elements 4*l + 128*j. Blocks of <= 128 elements keep their values in
// registers; longer blocks are read twice (amax pass, encode pass; the second read hits L1/L2).

// Quantizes block t (elements [t*bs, t*bs+len)) of `src` (n elements) into the runs dst[0..ndst)
// (codes at dst[q], scales at dst[q] + pad4(n)): one quantization, written to every destination.
template <int DT>
SC_DEV void sc_lp_quant_block(const typename ScType<DT>::T* src, bool sal, size_t n, size_t bs, size_t t,
                              char* const (&dst)[SC_MAX_RANKS], int ndst, int lane, const ScFp8& f) {
  const size_t b0 = t * bs;
  const size_t len = min(bs, n - b0);
  const size_t end = b0 + len;
  const size_t sc_off = (n + 3) & ~(size_t)3;
  float v[4];
  uint32_t am = 0;
  int e;
  if (bs <= 128) {
    const size_t i = b0 + 4 * (size_t)lane;
    if (i < end) sc_lp_load4<DT>(src, i, end, sal, v);
    else v[0] = v[1] = v[2] = v[3] = 0.0f;
    am = sc_group_max(sc_lp_amax4(v, 0));
    e = sc_lp_scale_exp(am, f);
    if (i < end) {
      const uint32_t w = sc_lp_encode4(v, sc_pow2f(-e), f);
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < ndst) *(uint32_t*)(dst[q] + i) = w;
    }
  } else {
    for (size_t i = b0 + 4 * (size_t)lane; i < end; i += 128) {
      sc_lp_load4<DT>(src, i, end, sal, v);
      am = sc_lp_amax4(v, am);
    }
    am = sc_group_max(am);
    e = sc_lp_scale_exp(am, f);
    const float inv = sc_pow2f(-e);
    for (size_t i = b0 + 4 * (size_t)lane; i < end; i += 128) {
      sc_lp_load4<DT>(src, i, end, sal, v);
      const uint32_t w = sc_lp_encode4(v, inv, f);
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < ndst) *(uint32_t*)(dst[q] + i) = w;
    }
  }
  if (lane == 0) {
    const float s = sc_pow2f(e);
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q)
      if (q < ndst) ((float*)(dst[q] + sc_off))[t] = s;
  }
}

// Dequantizes 4 elements [i, i+4) of the run at `run` (n elements): codes * scale of block t.
// The product is rounded on its own, never fused into a following add (an FMA would differ from
// the reference where decode * scale overflows to Inf, near FLT_MAX: seen on H200, 2026-11-30).
SC_DEV void sc_lp_deq4(const char* run, size_t n, size_t t, size_t i, const ScFp8& f, float (&v)[4]) {
#if SC_HIP
#pragma clang fp contract(off)
#endif
  const float scale = sc_ldcg_f32((const float*)(run + ((n + 3) & ~(size_t)3)) + t);
  const uint32_t w = sc_ldcg_u32((const uint32_t*)(run + i));
#pragma unroll
  for (int k = 0; k < 4; ++k) {
#if SC_HIP
    v[k] = sc_fp8_decode(w >> (8 * k), f) * scale;
#else
    v[k] = __fmul_rn(sc_fp8_decode(w >> (8 * k), f), scale);
#endif
  }
}

// FP32 sum over q = 0..nr-1 (fixed order) of the dequantized block t of runs[q], then / nr for
// AVG; returns in v the 4 values at [i, i+4).
template <int OP>
SC_DEV void sc_lp_sum4(const char* const (&runs)[SC_MAX_RANKS], int nr, size_t n, size_t t, size_t i, const ScFp8& f,
                       float (&v)[4]) {
  sc_lp_deq4(runs[0], n, t, i, f, v);
#pragma unroll
  for (int q = 1; q < SC_MAX_RANKS; ++q) {
    if (q < nr) {
      float w[4];
      sc_lp_deq4(runs[q], n, t, i, f, w);
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = v[k] + w[k];
    }
  }
  if (OP == SC_OP_AVG) {
#pragma unroll
    for (int k = 0; k < 4; ++k) v[k] = v[k] / (float)nr;  // IEEE division (no fast-math)
  }
}

// Reduce step: block t of the sum of the runs, requantized into run `dst` (n elements).
template <int OP>
SC_DEV void sc_lp_sum_requant_block(const char* const (&runs)[SC_MAX_RANKS], int nr, size_t n, size_t bs, size_t t,
                                    char* const (&dst)[SC_MAX_RANKS], int ndst, int lane, const ScFp8& f) {
  const size_t b0 = t * bs, len = min(bs, n - b0), pend = b0 + ((len + 3) & ~(size_t)3);
  float v[4];
  uint32_t am = 0;
  const size_t sc_off = (n + 3) & ~(size_t)3;
  if (bs <= 128) {
    const size_t i = b0 + 4 * (size_t)lane;
    if (i < pend) sc_lp_sum4<OP>(runs, nr, n, t, i, f, v);
    else v[0] = v[1] = v[2] = v[3] = 0.0f;
    am = sc_group_max(sc_lp_amax4(v, 0));
    const int e = sc_lp_scale_exp(am, f);
    if (i < pend) {
      const uint32_t w = sc_lp_encode4(v, sc_pow2f(-e), f);
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < ndst) *(uint32_t*)(dst[q] + i) = w;
    }
    if (lane == 0) {
      const float s = sc_pow2f(e);
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < ndst) ((float*)(dst[q] + sc_off))[t] = s;
    }
    return;
  }
  // Padding codes of the run's last block decode to 0 (code 0x00), so 4-wide reads are safe.
  for (size_t i = b0 + 4 * (size_t)lane; i < pend; i += 128) {
    sc_lp_sum4<OP>(runs, nr, n, t, i, f, v);
    am = sc_lp_amax4(v, am);
  }
  am = sc_group_max(am);
  const int e = sc_lp_scale_exp(am, f);
  const float inv = sc_pow2f(-e);
  for (size_t i = b0 + 4 * (size_t)lane; i < pend; i += 128) {
    sc_lp_sum4<OP>(runs, nr, n, t, i, f, v);
    const uint32_t w = sc_lp_encode4(v, inv, f);
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q)
      if (q < ndst) *(uint32_t*)(dst[q] + i) = w;
  }
  if (lane == 0) {
    const float s = sc_pow2f(e);
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q)
      if (q < ndst) ((float*)(dst[q] + sc_off))[t] = s;
  }
}

#endif  // device compilation
