// Whole-run LP operations for the collective kernels: quantize a run, dequantize a run, FP32-sum
// several runs, and sum + requantize. Each is grid-strided over the run's quantization blocks and
// picks one of two paths for the whole launch:
//
//   vector path  (block size bs = 16 * L, L a power of two <= 32, so bs in 16..512): L lanes per
//                block, 16 consecutive elements per lane, 16-byte loads and stores of codes (one
//                per lane per run), an L-lane max for the scale, hardware FP8 conversion where
//                the target has it (sm_89+ and E4M3FN);
//   generic path (any other block size): one 32-lane group per block, 4 elements per lane
//                (lp_codec.cuh's block functions).
//
// Both paths give identical bytes and values (the codec is the same function of the same inputs;
// only the thread that computes an element differs). Block t of a run always goes to the same CTA
// for a given grid, in every phase and on every rank, so the per-CTA barriers of signal.cuh cover
// exactly the blocks a CTA reads (rule 4 of ANCHORS.md).
#pragma once

#include "lp_codec.cuh"

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)

#if SC_CUDA
#include <cuda_fp8.h>
#endif

// Lanes per block on the vector path, or 0 for the generic path.
SC_DEV int sc_lp_vec_lanes(size_t bs) {
  if (bs % 16 != 0 || bs > 512) return 0;
  const size_t l = bs / 16;
  return (l & (l - 1)) == 0 ? (int)l : 0;
}

// ---- 16-element codec steps ----

// Two floats -> two FP8 codes (low byte: a). Hardware conversion on sm_89+ for E4M3FN: cvt.rn
// (nearest even) with .satfinite, which matches sc_fp8_encode on every finite input (finite
// overflow saturates to +-448 in both); only non-finite inputs differ (satfinite maps +-Inf to
// +-448), so they are patched to the format's NaN code as the reference does.
SC_DEV uint32_t sc_fp8_encode2(float a, float b, const ScFp8& f) {
#if SC_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (f.neg_zero) {
    uint32_t w = (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    if ((__float_as_uint(a) & 0x7FFFFFFFu) >= 0x7F800000u) w = (w & 0xFF00u) | f.nan_code;
    if ((__float_as_uint(b) & 0x7FFFFFFFu) >= 0x7F800000u) w = (w & 0x00FFu) | (f.nan_code << 8);
    return w;
  }
#endif
  return sc_fp8_encode(a, f) | (sc_fp8_encode(b, f) << 8);
}
// Two FP8 codes (low byte first) -> two floats; exact. Hardware on sm_89+ for E4M3FN (every
// E4M3 value is a half; NaN codes give a NaN, as sc_fp8_decode does).
SC_DEV void sc_fp8_decode2(uint32_t w, const ScFp8& f, float& a, float& b) {
#if SC_CUDA && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (f.neg_zero) {
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(w & 0xFFFFu), __NV_E4M3);
    const float2 v = __half22float2(__half2(h));
    a = v.x;
    b = v.y;
    return;
  }
#endif
  a = sc_fp8_decode(w & 0xFFu, f);
  b = sc_fp8_decode((w >> 8) & 0xFFu, f);
}

SC_DEV uint4 sc_lp_encode16(const float (&v)[16], float inv, const ScFp8& f) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    w[k] = sc_fp8_encode2(v[4 * k] * inv, v[4 * k + 1] * inv, f) | (sc_fp8_encode2(v[4 * k + 2] * inv, v[4 * k + 3] * inv, f) << 16);
  return make_uint4(w[0], w[1], w[2], w[3]);
}
// v[k] = decode(code k) * scale for k < m, 0 beyond. The product is rounded on its own (never
// fused into a following add: see sc_lp_deq4).
SC_DEV void sc_lp_decode16(uint4 c, float scale, int m, const ScFp8& f, float (&v)[16]) {
#if SC_HIP
#pragma clang fp contract(off)
#endif
  const uint32_t w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    sc_fp8_decode2(w[k], f, v[4 * k], v[4 * k + 1]);
    sc_fp8_decode2(w[k] >> 16, f, v[4 * k + 2], v[4 * k + 3]);
  }
#pragma unroll
  for (int k = 0; k < 16; ++k) {
#if SC_HIP
    v[k] = k < m ? v[k] * scale : 0.0f;
#else
    v[k] = k < m ? __fmul_rn(v[k], scale) : 0.0f;
#endif
  }
}
SC_DEV uint32_t sc_lp_amax16(const float (&v)[16]) {
  uint32_t m = 0;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const uint32_t a = __float_as_uint(v[k]) & 0x7FFFFFFFu;
    if (a < 0x7F800000u && a > m) m = a;  // finite only (NaN / Inf ignored)
  }
  return m;
}
// Elements [i, i + m) of p (m <= 16) as floats, zero beyond m. al: p is 16-byte aligned.
template <int DT>
SC_DEV void sc_lp_load16(const typename ScType<DT>::T* p, size_t i, int m, bool al, float (&v)[16]) {
  if (DT == SC_DT_F32) {
    const float* q = (const float*)p + i;
    if (al && m == 16) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float4 x = ((const float4*)q)[k];
        v[4 * k] = x.x; v[4 * k + 1] = x.y; v[4 * k + 2] = x.z; v[4 * k + 3] = x.w;
      }
      return;
    }
#pragma unroll
    for (int k = 0; k < 16; ++k) v[k] = k < m ? q[k] : 0.0f;
  } else {
    const uint16_t* q = (const uint16_t*)p + i;
    if (al && m == 16) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const uint4 x = ((const uint4*)q)[k];
        const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          v[8 * k + 2 * j] = sc_bf2f((uint16_t)(w[j] & 0xFFFFu));
          v[8 * k + 2 * j + 1] = sc_bf2f((uint16_t)(w[j] >> 16));
        }
      }
      return;
    }
#pragma unroll
    for (int k = 0; k < 16; ++k) v[k] = k < m ? sc_bf2f(q[k]) : 0.0f;
  }
}
// Stores v[0..m) at p[i ..) (bf16 rounded to nearest even). al: p is 16-byte aligned.
template <int DT>
SC_DEV void sc_lp_store16(typename ScType<DT>::T* p, size_t i, int m, bool al, const float (&v)[16]) {
  if (DT == SC_DT_F32) {
    float* q = (float*)p + i;
    if (al && m == 16) {
#pragma unroll
      for (int k = 0; k < 4; ++k) ((float4*)q)[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
      return;
    }
#pragma unroll
    for (int k = 0; k < 16; ++k)
      if (k < m) q[k] = v[k];
  } else {
    uint16_t* q = (uint16_t*)p + i;
    if (al && m == 16) {
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = (uint32_t)sc_f2bf(v[8 * k + 2 * j]) | ((uint32_t)sc_f2bf(v[8 * k + 2 * j + 1]) << 16);
        ((uint4*)q)[k] = make_uint4(w[0], w[1], w[2], w[3]);
      }
      return;
    }
#pragma unroll
    for (int k = 0; k < 16; ++k)
      if (k < m) q[k] = sc_f2bf(v[k]);
  }
}

// ---- the vector path's walk over blocks ----
//
// A warp takes W = 32 / L consecutive blocks per step; lane l works on block base + l / L,
// elements [16 * (l % L), +16) of it. The loop bound is warp-uniform (every lane runs the same
// steps and reaches the shuffles); lanes past the run's end are inactive.
struct ScLpLane {
  size_t t;     // block index
  size_t i;     // first element of this lane (run-relative)
  int m;        // elements of this lane in the run: 0..16
  bool lead;    // first lane of its block (writes the scale)
};
struct ScLpWalk {
  size_t nb, bs, n, step;
  size_t base;
  int L, sub, ll;
  SC_DEV ScLpWalk(size_t n_, size_t bs_, int L_) : nb((n_ + bs_ - 1) / bs_), bs(bs_), n(n_), L(L_) {
    const int lane = threadIdx.x & 31;
    const int W = 32 / L;
    sub = lane / L;
    ll = lane % L;
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = ((size_t)gridDim.x * blockDim.x) >> 5;
    base = warp * (size_t)W;
    step = nw * (size_t)W;
  }
  SC_DEV bool more() const { return base < nb; }
  SC_DEV void next() { base += step; }
  SC_DEV ScLpLane lane() const {
    ScLpLane x;
    x.t = base + (size_t)sub;
    x.i = x.t * bs + 16 * (size_t)ll;
    x.lead = ll == 0 && x.t < nb;
    const long long left = x.t < nb ? (long long)n - (long long)x.i : 0;
    const long long inblk = (long long)bs - 16 * (long long)ll;  // elements of the block from i
    long long m = left < inblk ? left : inblk;
    x.m = m <= 0 ? 0 : (m > 16 ? 16 : (int)m);
    return x;
  }
};

// Writes this lane's 16 codes (those inside the run's code area) and, from the block's first lane,
// its scale, to ndst runs of n elements.
SC_DEV void sc_lp_put16(char* const (&dst)[SC_MAX_RANKS], int ndst, size_t n, const ScLpLane& x, uint4 w, int e) {
  const size_t pad = (n + 3) & ~(size_t)3;
  if (x.m > 0) {
    if (x.i + 16 <= pad) {
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < ndst) *(uint4*)(dst[q] + x.i) = w;  // run bases are 16-byte aligned, i % 16 == 0
    } else {
      const uint32_t ws[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (x.i + 4 * k < pad) {
#pragma unroll
          for (int q = 0; q < SC_MAX_RANKS; ++q)
            if (q < ndst) *(uint32_t*)(dst[q] + x.i + 4 * k) = ws[k];
        }
    }
  }
  if (x.lead) {
    const float s = sc_pow2f(e);
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q)
      if (q < ndst) ((float*)(dst[q] + pad))[x.t] = s;
  }
}
// This lane's 16 codes of run `run` (n elements) and their block's scale, as loaded (not yet
// decoded: callers load several before they decode, to keep more loads in flight). Nothing is
// read for a lane outside the run (m == 0).
struct ScLpRaw {
  uint4 c;
  float scale;
};
SC_DEV ScLpRaw sc_lp_fetch16(const char* run, size_t n, const ScLpLane& x) {
  ScLpRaw r;
  r.c = make_uint4(0, 0, 0, 0);
  r.scale = 0.0f;
  if (x.m == 0) return r;
  const size_t pad = (n + 3) & ~(size_t)3;
  r.scale = sc_ldcg_f32((const float*)(run + pad) + x.t);
  if (x.i + 16 <= pad) {
    r.c = sc_ld16_cg((const uint4*)(run + x.i));
  } else {  // the run's last lane: only the words inside the code area (the run may end right there)
    uint32_t ws[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) ws[k] = x.i + 4 * k < pad ? sc_ldcg_u32((const uint32_t*)(run + x.i + 4 * k)) : 0u;
    r.c = make_uint4(ws[0], ws[1], ws[2], ws[3]);
  }
  return r;
}
// The 16 values of a fetched lane, dequantized (0 beyond the run).
SC_DEV void sc_lp_unfetch16(const ScLpRaw& r, const ScLpLane& x, const ScFp8& f, float (&v)[16]) {
  if (x.m == 0) {
#pragma unroll
    for (int k = 0; k < 16; ++k) v[k] = 0.0f;
    return;
  }
  sc_lp_decode16(r.c, r.scale, x.m, f, v);
}
// This lane's 16 values of run `run` (n elements), dequantized (0 beyond the run).
SC_DEV void sc_lp_get16(const char* run, size_t n, const ScLpLane& x, const ScFp8& f, float (&v)[16]) {
  sc_lp_unfetch16(sc_lp_fetch16(run, n, x), x, f, v);
}
// v += the values of one fetched run (callers keep the rank order).
SC_DEV void sc_lp_add16(const ScLpRaw& r, const ScLpLane& x, const ScFp8& f, float (&v)[16]) {
  float w[16];
  sc_lp_unfetch16(r, x, f, w);
#pragma unroll
  for (int k = 0; k < 16; ++k) v[k] = v[k] + w[k];
}
// AVG: the sum of nr runs divided by nr (IEEE division); other ops: unchanged.
template <int OP>
SC_DEV void sc_lp_finish16(float (&v)[16], int nr) {
  if (OP == SC_OP_AVG) {
#pragma unroll
    for (int k = 0; k < 16; ++k) v[k] = v[k] / (float)nr;
  }
}
// Two fetched runs' values, summed in rank order: sc_lp_sum16 for nr == 2, same bits.
template <int OP>
SC_DEV void sc_lp_sum2_16(const ScLpRaw& a, const ScLpRaw& b, const ScLpLane& x, const ScFp8& f, float (&v)[16]) {
  sc_lp_unfetch16(a, x, f, v);
  sc_lp_add16(b, x, f, v);
  sc_lp_finish16<OP>(v, 2);
}
// FP32 sum of the runs' values in rank order 0..nr-1; AVG divides by nr.
template <int OP>
SC_DEV void sc_lp_sum16(const char* const (&runs)[SC_MAX_RANKS], int nr, size_t n, const ScLpLane& x, const ScFp8& f,
                        float (&v)[16]) {
  sc_lp_get16(runs[0], n, x, f, v);
#pragma unroll
  for (int q = 1; q < SC_MAX_RANKS; ++q)
    if (q < nr) sc_lp_add16(sc_lp_fetch16(runs[q], n, x), x, f, v);
  sc_lp_finish16<OP>(v, nr);
}
// Scale exponent of a lane group's values, then this lane's codes.
SC_DEV uint4 sc_lp_quant16(const float (&v)[16], int L, const ScFp8& f, int& e) {
  e = sc_lp_scale_exp(sc_lane_group_max(sc_lp_amax16(v), L), f);
  return sc_lp_encode16(v, sc_pow2f(-e), f);
}

// ---- run operations (called by every thread of the grid) ----
//
// L: lanes per block of the vector path (sc_lp_vec_lanes), or 0 for the generic path. The vector
// path needs every run (the codes) 16-byte aligned: staging slots are; the stand-alone codec
// kernels check their buffers and pass 0 otherwise. Every thread of a launch must pass the same L.

// Quantizes src[0..n) (DT elements) into the runs dst[0..ndst): one quantization, every copy.
template <int DT>
SC_DEV void sc_lp_quantize_run(const typename ScType<DT>::T* src, size_t n, size_t bs, char* const (&dst)[SC_MAX_RANKS],
                               int ndst, int L, const ScFp8& f) {
  if (L) {
    const bool al = sc_aligned16(src);
    for (ScLpWalk w(n, bs, L); w.more(); w.next()) {
      const ScLpLane x = w.lane();
      float v[16];
      sc_lp_load16<DT>(src, x.i, x.m, al, v);
      int e;
      const uint4 c = sc_lp_quant16(v, L, f, e);
      sc_lp_put16(dst, ndst, n, x, c, e);
    }
    return;
  }
  const ScLpGroups g(n, bs);
  const bool sal = sc_lp_aligned<DT>(src);
  for (size_t t = g.t0; t < g.nb; t += g.stride) sc_lp_quant_block<DT>(src, sal, n, bs, t, dst, ndst, g.lane, f);
}

// out[0..n) = FP32 sum over the runs in rank order (AVG: / nr).
template <int DT, int OP>
SC_DEV void sc_lp_sum_run(const char* const (&runs)[SC_MAX_RANKS], int nr, size_t n, size_t bs,
                          typename ScType<DT>::T* out, int L, const ScFp8& f) {
  if (L) {
    const bool al = sc_aligned16(out);
    // Two ranks (the one-shot's default; reduceScatter): two steps of the walk at a time, all four
    // fetches first. A lane's fetch waits for memory and its decode waits for the fetch; with the
    // next step's fetches in flight too, more of that latency overlaps (2x H200, with
    // 4 chunks per call: fp32 128-512 MB 0.5-4% faster, bf16 16-512 MB 1-7%, 1 GB fp32 ~1% slower;
    // docs/design.md). `two` is warp-uniform (the walk's position is per warp).
    // The quantize side done the same way is slower from 32 MB (its pushes share the SMs and the
    // links with a chained chunk's sum), so it stays one step at a time.
    if (nr == 2) {
      for (ScLpWalk w(n, bs, L); w.more();) {
        const ScLpLane x0 = w.lane();
        w.next();
        const bool two = w.more();
        ScLpLane x1 = w.lane();
        if (!two) x1.m = 0;  // fetches nothing
        const ScLpRaw a0 = sc_lp_fetch16(runs[0], n, x0), b0 = sc_lp_fetch16(runs[1], n, x0);
        const ScLpRaw a1 = sc_lp_fetch16(runs[0], n, x1), b1 = sc_lp_fetch16(runs[1], n, x1);
        float v[16];
        if (x0.m > 0) {
          sc_lp_sum2_16<OP>(a0, b0, x0, f, v);
          sc_lp_store16<DT>(out, x0.i, x0.m, al, v);
        }
        if (x1.m > 0) {
          sc_lp_sum2_16<OP>(a1, b1, x1, f, v);
          sc_lp_store16<DT>(out, x1.i, x1.m, al, v);
        }
        if (two) w.next();
      }
      return;
    }
    for (ScLpWalk w(n, bs, L); w.more(); w.next()) {
      const ScLpLane x = w.lane();
      if (x.m == 0) continue;
      float v[16];
      sc_lp_sum16<OP>(runs, nr, n, x, f, v);
      sc_lp_store16<DT>(out, x.i, x.m, al, v);
    }
    return;
  }
  const ScLpGroups g(n, bs);
  const bool oal = sc_lp_aligned<DT>(out);
  for (size_t t = g.t0; t < g.nb; t += g.stride) {
    const size_t b0 = t * bs, end = b0 + min(bs, n - b0);
    float v[4];
    for (size_t i = b0 + 4 * (size_t)g.lane; i < end; i += 128) {
      sc_lp_sum4<OP>(runs, nr, n, t, i, f, v);
      sc_lp_store4<DT>(out, i, end, oal, v);
    }
  }
}

// Dequantizes the run `run` (n elements) into out[0..n): the sum of that one run.
template <int DT>
SC_DEV void sc_lp_dequantize_run(const char* run, size_t n, size_t bs, typename ScType<DT>::T* out, int L, const ScFp8& f) {
  const char* const one[SC_MAX_RANKS] = {run};
  sc_lp_sum_run<DT, SC_OP_SUM>(one, 1, n, bs, out, L, f);
}

// The runs' FP32 sum (as sc_lp_sum_run), requantized once into the runs dst[0..ndst).
template <int OP>
SC_DEV void sc_lp_sum_requantize_run(const char* const (&runs)[SC_MAX_RANKS], int nr, size_t n, size_t bs,
                                     char* const (&dst)[SC_MAX_RANKS], int ndst, int L, const ScFp8& f) {
  if (L) {
    for (ScLpWalk w(n, bs, L); w.more(); w.next()) {
      const ScLpLane x = w.lane();
      float v[16];
      sc_lp_sum16<OP>(runs, nr, n, x, f, v);
      int e;
      const uint4 c = sc_lp_quant16(v, L, f, e);
      sc_lp_put16(dst, ndst, n, x, c, e);
    }
    return;
  }
  const ScLpGroups g(n, bs);
  for (size_t t = g.t0; t < g.nb; t += g.stride) sc_lp_sum_requant_block<OP>(runs, nr, n, bs, t, dst, ndst, g.lane, f);
}

// ---- stand-alone codec kernels (tests, and the oracle comparison with the Java codecs) ----
// They use the same run operations (and so the same path choice) as the collectives; a buffer not
// 16-byte aligned takes the generic path.
template <int DT>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_lp_quantize(const typename ScType<DT>::T* src, size_t n, size_t bs, char* dst, ScFp8 f) {
  char* const d[SC_MAX_RANKS] = {dst};
  sc_lp_quantize_run<DT>(src, n, bs, d, 1, sc_aligned16(dst) ? sc_lp_vec_lanes(bs) : 0, f);
}
template <int DT>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_lp_dequantize(const char* src, size_t n, size_t bs, typename ScType<DT>::T* dst, ScFp8 f) {
  sc_lp_dequantize_run<DT>(src, n, bs, dst, sc_aligned16(src) ? sc_lp_vec_lanes(bs) : 0, f);
}
// Raw scalar codec (no scaling), through the same pairwise conversion as the run operations:
// codes[i] = encode(src[i]); decode: out[i] = decode(codes[i]).
__global__ void sc_k_fp8_encode(const float* src, size_t n, uint8_t* dst, ScFp8 f) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    dst[i] = (uint8_t)(sc_fp8_encode2(src[i], 0.0f, f) & 0xFFu);
}
__global__ void sc_k_fp8_decode(const uint8_t* src, size_t n, float* dst, ScFp8 f) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float a, b;
    sc_fp8_decode2(src[i], f, a, b);
    dst[i] = a;
  }
}

#endif  // device compilation
