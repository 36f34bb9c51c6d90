// Element types, 16-byte packs and the reduction arithmetic shared by all DDA kernels.
#pragma once

#include "signal.cuh"

#define SC_THREADS 512

// Data type / op codes (same numbers as sparkcomms.h).
enum { SC_DT_F32 = 0, SC_DT_BF16 = 1, SC_DT_F16 = 2, SC_DT_F64 = 3, SC_DT_I32 = 4, SC_DT_I64 = 5 };
enum { SC_OP_SUM = 0, SC_OP_AVG = 1, SC_OP_MIN = 2, SC_OP_MAX = 3, SC_OP_PROD = 4, SC_OP_PREMUL = 5 };

// T: storage type; Acc: accumulator (FP32 for fp32/bf16/fp16, FP64 for double, int64 for ints).
template <int DT> struct ScType;
template <> struct ScType<SC_DT_F32> {
  typedef float T; typedef float Acc; enum { V = 4 };
  static SC_DEV Acc to(T x) { return x; }
  static SC_DEV T from(Acc a) { return a; }
};
template <> struct ScType<SC_DT_BF16> {
  typedef uint16_t T; typedef float Acc; enum { V = 8 };
  static SC_DEV Acc to(T x) { return sc_bf2f(x); }
  static SC_DEV T from(Acc a) { return sc_f2bf(a); }  // round to nearest even
};
template <> struct ScType<SC_DT_F16> {
  typedef uint16_t T; typedef float Acc; enum { V = 8 };
  static SC_DEV Acc to(T x) { return sc_h2f(x); }
  static SC_DEV T from(Acc a) { return sc_f2h(a); }  // round to nearest even
};
template <> struct ScType<SC_DT_F64> {
  typedef double T; typedef double Acc; enum { V = 2 };
  static SC_DEV Acc to(T x) { return x; }
  static SC_DEV T from(Acc a) { return a; }
};
template <> struct ScType<SC_DT_I32> {
  typedef int32_t T; typedef int64_t Acc; enum { V = 4 };
  static SC_DEV Acc to(T x) { return x; }
  static SC_DEV T from(Acc a) { return (T)(uint32_t)(uint64_t)a; }  // wraps like int32 math
};
template <> struct ScType<SC_DT_I64> {
  typedef int64_t T; typedef int64_t Acc; enum { V = 2 };
  static SC_DEV Acc to(T x) { return x; }
  static SC_DEV T from(Acc a) { return a; }
};

template <typename Acc, int OP> struct ScOp;
// Floating accumulators.
template <typename Acc> struct ScOp<Acc, SC_OP_SUM> {
  static SC_DEV Acc first(Acc x, Acc) { return x; }
  static SC_DEV Acc add(Acc a, Acc x, Acc) { return a + x; }
  static SC_DEV Acc fin(Acc a, int) { return a; }
};
template <typename Acc> struct ScOp<Acc, SC_OP_AVG> {
  static SC_DEV Acc first(Acc x, Acc) { return x; }
  static SC_DEV Acc add(Acc a, Acc x, Acc) { return a + x; }
  static SC_DEV Acc fin(Acc a, int n) { return a / (Acc)n; }
};
template <typename Acc> struct ScOp<Acc, SC_OP_MIN> {
  static SC_DEV Acc first(Acc x, Acc) { return x; }
  static SC_DEV Acc add(Acc a, Acc x, Acc) { return x < a ? x : a; }
  static SC_DEV Acc fin(Acc a, int) { return a; }
};
template <typename Acc> struct ScOp<Acc, SC_OP_MAX> {
  static SC_DEV Acc first(Acc x, Acc) { return x; }
  static SC_DEV Acc add(Acc a, Acc x, Acc) { return x > a ? x : a; }
  static SC_DEV Acc fin(Acc a, int) { return a; }
};
template <typename Acc> struct ScOp<Acc, SC_OP_PROD> {
  static SC_DEV Acc first(Acc x, Acc) { return x; }
  static SC_DEV Acc add(Acc a, Acc x, Acc) { return a * x; }
  static SC_DEV Acc fin(Acc a, int) { return a; }
};
template <typename Acc> struct ScOp<Acc, SC_OP_PREMUL> {
  static SC_DEV Acc first(Acc x, Acc f) { return f * x; }
  static SC_DEV Acc add(Acc a, Acc x, Acc f) { return a + f * x; }
  static SC_DEV Acc fin(Acc a, int) { return a; }
};
// Integer accumulators: wrap-around sum/product (unsigned arithmetic, no UB), truncating AVG.
template <> struct ScOp<int64_t, SC_OP_SUM> {
  static SC_DEV int64_t first(int64_t x, int64_t) { return x; }
  static SC_DEV int64_t add(int64_t a, int64_t x, int64_t) { return (int64_t)((uint64_t)a + (uint64_t)x); }
  static SC_DEV int64_t fin(int64_t a, int) { return a; }
};
template <> struct ScOp<int64_t, SC_OP_AVG> {
  static SC_DEV int64_t first(int64_t x, int64_t) { return x; }
  static SC_DEV int64_t add(int64_t a, int64_t x, int64_t) { return (int64_t)((uint64_t)a + (uint64_t)x); }
  static SC_DEV int64_t fin(int64_t a, int n) { return a / (int64_t)n; }
};
template <> struct ScOp<int64_t, SC_OP_PROD> {
  static SC_DEV int64_t first(int64_t x, int64_t) { return x; }
  static SC_DEV int64_t add(int64_t a, int64_t x, int64_t) { return (int64_t)((uint64_t)a * (uint64_t)x); }
  static SC_DEV int64_t fin(int64_t a, int) { return a; }
};

template <int DT> union ScPack {
  uint4 u;
  typename ScType<DT>::T e[ScType<DT>::V];
};

SC_DEV bool sc_aligned16(const void* p) { return (((uintptr_t)p) & 15u) == 0; }

// Unit u covers elements [u*V, min(count, u*V+V)). Full units of 16-byte aligned buffers use one
// 16-byte access; partial units and unaligned buffers fall back to element accesses (the
// element -> thread mapping is the same either way).
// The element-wise paths (a buffer's last, partial unit; unaligned buffers) are kept out of line:
// they are rare, and inlined they double the size of the 16-bit kernels' hot code.
template <int DT>
SC_DEV_NOINLINE uint4 sc_load_unit_slow(const typename ScType<DT>::T* base, size_t e0, size_t count) {
  ScPack<DT> p;
  p.u = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int k = 0; k < ScType<DT>::V; ++k)
    if (e0 + k < count) p.e[k] = base[e0 + k];
  return p.u;
}
template <int DT>
SC_DEV_NOINLINE void sc_store_unit_slow(typename ScType<DT>::T* base, size_t e0, size_t count, uint4 v) {
  ScPack<DT> p;
  p.u = v;
#pragma unroll
  for (int k = 0; k < ScType<DT>::V; ++k)
    if (e0 + k < count) base[e0 + k] = p.e[k];
}
template <int DT>
SC_DEV uint4 sc_load_unit(const typename ScType<DT>::T* base, size_t u, size_t count, bool al) {
  const size_t e0 = u * ScType<DT>::V;
  if (al && e0 + ScType<DT>::V <= count) return *(const uint4*)(base + e0);
  return sc_load_unit_slow<DT>(base, e0, count);
}
template <int DT>
SC_DEV void sc_store_unit(typename ScType<DT>::T* base, size_t u, size_t count, bool al, uint4 v) {
  const size_t e0 = u * ScType<DT>::V;
  if (al && e0 + ScType<DT>::V <= count) {
    *(uint4*)(base + e0) = v;
    return;
  }
  sc_store_unit_slow<DT>(base, e0, count, v);
}

// bf16 packs, word by word: a 32-bit word holds elements 2i (low half) and 2i+1 (high half); each
// widens to fp32 by a shift or a mask, and both results go back into one word (sc_f2bf2). Same
// order and rounding as the element path below (PREMUL: which product a compiler fuses with the
// add may differ between compilers: a HIP-only caveat, see docs/design.md). It runs on the
// one-shots' critical path, after the last peer unit arrives. At 256 KB (2x H200) the element
// path made bf16 0.08-0.14 us per op slower than fp32; with this path the gap is 0.00-0.05 us.
template <int OP>
SC_DEV uint4 sc_reduce_bf16(const uint4 (&v)[SC_MAX_RANKS], int n, float f) {
  typedef ScOp<float, OP> Op;
  float lo[4], hi[4];
  const uint32_t* w = &v[0].x;  // the four words of a uint4
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    lo[k] = Op::first(__uint_as_float(w[k] << 16), f);
    hi[k] = Op::first(__uint_as_float(w[k] & 0xffff0000u), f);
  }
#pragma unroll
  for (int q = 1; q < SC_MAX_RANKS; ++q) {
    if (q < n) {
      w = &v[q].x;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        lo[k] = Op::add(lo[k], __uint_as_float(w[k] << 16), f);
        hi[k] = Op::add(hi[k], __uint_as_float(w[k] & 0xffff0000u), f);
      }
    }
  }
  uint32_t o[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) o[k] = sc_f2bf2(Op::fin(hi[k], n), Op::fin(lo[k], n));
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Reduce n packs in fixed rank order 0..n-1 (same result bits on every rank).
template <int DT, int OP>
SC_DEV uint4 sc_reduce_packs(const uint4 (&v)[SC_MAX_RANKS], int n, typename ScType<DT>::Acc f) {
  if constexpr (DT == SC_DT_BF16) {
    return sc_reduce_bf16<OP>(v, n, f);
  } else {
    typedef ScType<DT> Ty;
    typedef typename Ty::Acc Acc;
    typedef ScOp<Acc, OP> Op;
    const int V = Ty::V;
    Acc acc[V];
    ScPack<DT> in;
    in.u = v[0];
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = Op::first(Ty::to(in.e[k]), f);
#pragma unroll
    for (int q = 1; q < SC_MAX_RANKS; ++q) {
      if (q < n) {
        in.u = v[q];
#pragma unroll
        for (int k = 0; k < V; ++k) acc[k] = Op::add(acc[k], Ty::to(in.e[k]), f);
      }
    }
    ScPack<DT> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.e[k] = Ty::from(Op::fin(acc[k], n));
    return out.u;
  }
}
