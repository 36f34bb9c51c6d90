// DDA allreduce kernels: flat (one-shot) and tree (two-shot), push style.
//
// Both write into peers' registered staging buffers (remote stores over NVLink / xGMI), pass one
// barrier, and then read only local memory. Each unit (16 bytes) is handled by the same
// (block, thread) in every phase and on every rank; the barrier is per block, so that identical
// mapping is what makes "peer block b arrived" cover exactly the units block b will read.
//
// NR (flat, LL and Lamport one-shots): the rank count when fixed at compile time. The host launches
// NR = 2 for two ranks, where the rank loops and the reduction unroll to straight code, and NR = 0
// (c.nranks, loops up to SC_MAX_RANKS) otherwise. Same results, faster code (2x H200, Lamport
// 256 KB 3.49-3.53 us against 3.88-3.89; docs/design.md). MAXR bounds the push loops; the per-rank
// arrays keep SC_MAX_RANKS entries (the shape sc_reduce_packs takes), and their loops test q < n,
// which folds away when n is constant.
#pragma once

#include "dda_types.cuh"

// Flat / one-shot. Staging half of rank p holds n slots of `units` 16-byte units; slot q is
// written by rank q.
//   phase 1: push own input unit u into slot `rank` of every peer
//   barrier
//   phase 2: out[u] = reduce over q=0..n-1 of (q == rank ? own input : own slot q)[u]
// Prologue of the one-shot kernels: the PDL wait (the previous kernel may have written `send`), then
// this thread's first input unit, and only then sc_kernel_begin's `failed` check (called with
// wait = false: the wait is done). Loading before the check stores nothing, so stopping after it
// is safe; the two loads are in flight together, and the unit is kept for phase 2 rather than
// loaded again after the peers' data arrived (2x H200, 8 KB 2.93-3.03 us against 3.18-3.24 with
// the check first; docs/design.md).
template <int DT>
SC_DEV uint4 sc_load_first(const typename ScType<DT>::T* send, size_t t0, size_t units, size_t count, bool al) {
  sc_pdl_wait();
  return t0 < units ? sc_load_unit<DT>(send, t0, count, al) : make_uint4(0, 0, 0, 0);
}

template <int DT, int OP, int NR>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_allreduce_flat(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                    typename ScType<DT>::T* __restrict__ recv, size_t count,
                    typename ScType<DT>::Acc factor) {
  constexpr int MAXR = NR > 0 ? NR : SC_MAX_RANKS;
  const int n = NR > 0 ? NR : c.nranks, r = c.rank;
  const size_t units = (count + ScType<DT>::V - 1) / ScType<DT>::V;
  const size_t slot = units * 16;
  const bool sal = sc_aligned16(send), ral = sc_aligned16(recv);
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint4 first = sc_load_first<DT>(send, t0, units, count, sal);
  if (!sc_kernel_begin(c, false)) return;

  uint4* dst[SC_MAX_RANKS];
#pragma unroll
  for (int q = 0; q < MAXR; ++q)
    dst[q] = (q < n) ? (uint4*)(sc_half(c, q, seq) + (size_t)r * slot) : nullptr;

  for (size_t u = t0; u < units; u += stride) {
    const uint4 x = u == t0 ? first : sc_load_unit<DT>(send, u, count, sal);
#pragma unroll
    for (int q = 0; q < MAXR; ++q)
      if (q < n && q != r) dst[q][u] = x;
  }

  if (sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1)) {
    const char* mine = sc_half(c, r, seq);
    for (size_t u = t0; u < units; u += stride) {
      uint4 v[SC_MAX_RANKS];
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q) {
        if (q < n) {
          v[q] = (q == r) ? (u == t0 ? first : sc_load_unit<DT>(send, u, count, sal))
                          : sc_ld16_cg((const uint4*)(mine + (size_t)q * slot) + u);
        } else {
          v[q] = make_uint4(0, 0, 0, 0);
        }
      }
      sc_store_unit<DT>(recv, u, count, ral, sc_reduce_packs<DT, OP>(v, n, factor));
    }
  }
}

// LL slot layout. A unit travels as two 16-byte lines. Units go in groups of 32: group g takes
// 1 KB, line 0 of its 32 units first, then their line 1. The units of one warp are 32 consecutive
// indices of one group (block sizes are whole warps and every thread's units are t0 + k * stride,
// stride a multiple of 32), so a warp's store or load of one line covers 512 contiguous bytes.
// Interleaving both lines of a unit would have each instruction write every other 16 bytes: half
// of each 128-byte line per instruction, twice the NVLink write transactions.
#define SC_LL_GROUP_BYTES 1024
#define SC_LL_LINE1 512
SC_DEV size_t sc_ll_line0(size_t u) { return (u >> 5) * SC_LL_GROUP_BYTES + (u & 31) * 16; }
// Bytes of one rank's LL slot for `units` units (the host's capacity check uses the same formula).
inline __host__ __device__ size_t sc_ll_slot_bytes(size_t units) { return ((units + 31) >> 5) * SC_LL_GROUP_BYTES; }

// LL flag of an operation: a hash of its sequence number and its call words (never 0), so that
// stale lines of earlier operations, raw data of other kernels and lines of a peer that makes
// another call (count, type, op: see "Call headers" in signal.cuh) practically never carry it.
SC_DEV uint32_t sc_ll_flag(uint64_t seq, const uint32_t (&call)[4]) {
  uint64_t h = (seq + 1) * 0x9E3779B97F4A7C15ull;
#pragma unroll
  for (int k = 0; k < 4; ++k) h = (h ^ call[k]) * 0xBF58476D1CE4E5B9ull;
  return (uint32_t)(h >> 32) | 1u;
}

// Waits for one LL unit (two lines, at p and p + SC_LL_LINE1) of rank `peer` in our staging and
// returns its 16 data bytes.
SC_DEV bool sc_ll_recv(const ScDevComm& c, const char* p, uint32_t flag, int peer, uint4* out) {
  uint4 a, b;
  if (!sc_spin_until(c, peer, [&] {
        a = sc_ld_ll16(p);
        b = sc_ld_ll16(p + SC_LL_LINE1);
        return a.y == flag && a.w == flag && b.y == flag && b.w == flag;
      }))
    return false;
  *out = make_uint4(a.x, a.z, b.x, b.z);
  return true;
}

// The one-shots whose data proves its own arrival (LL below, Lamport in dda_lamport.cuh) share one
// body: push every own unit into slot `rank` of every peer, then, unit by unit, wait for each peer's
// copy in our own slot and reduce in rank order. No barrier: latency is one one-way NVLink trip.
// A protocol P says how a unit is prepared for the wire (prep; the reduction uses the same value for
// our own contribution), where a rank's slot starts (half(c, q, seq) + rank * slot_bytes(units)),
// how unit u is stored into a slot (push) and how its arrival is recognised (recv, a bounded wait).
// Same prologue as the other one-shots (sc_load_first); NR as above.
template <class P, int DT, int OP, int NR>
SC_DEV void sc_allreduce_oneshot(const P& p, const ScDevComm& c, uint64_t seq, const typename ScType<DT>::T* send,
                                 typename ScType<DT>::T* recv, size_t count, typename ScType<DT>::Acc factor) {
  constexpr int MAXR = NR > 0 ? NR : SC_MAX_RANKS;
  const int n = NR > 0 ? NR : c.nranks, r = c.rank;
  const size_t units = (count + ScType<DT>::V - 1) / ScType<DT>::V;
  const size_t slot = P::slot_bytes(units);
  const bool sal = sc_aligned16(send), ral = sc_aligned16(recv);
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const uint4 first = P::prep(sc_load_first<DT>(send, t0, units, count, sal));
  if (!sc_kernel_begin(c, false)) return;

  for (size_t u = t0; u < units; u += stride) {
    const uint4 x = u == t0 ? first : P::prep(sc_load_unit<DT>(send, u, count, sal));
#pragma unroll
    for (int q = 0; q < MAXR; ++q)
      if (q < n && q != r) p.push(P::half(c, q, seq) + (size_t)r * slot, u, x);
  }
  char* mine = P::half(c, r, seq);
  // The Lamport one-shot has no barrier and its data no tag: block 0 checks the peers' call
  // headers at the end (a rank with fewer units would otherwise finish without noticing). The
  // header is loaded here, before the data waits, so that at the end it is normally in registers.
  const bool hcheck = P::kHeaderAtEnd && blockIdx.x == 0 && c.call[0] != 0 && threadIdx.x < n && threadIdx.x != r;
  const uint4* hp = sc_hdr(c.self, c.call_seq, hcheck ? (int)threadIdx.x : 0);
  uint4 ha = make_uint4(0, 0, 0, 0), hb = ha;
  if (hcheck) {
    ha = sc_ld_ll16(hp);
    hb = sc_ld_ll16(hp + 1);
  }
  bool all_ok = true;
  for (size_t u = t0; u < units; u += stride) {
    uint4 v[SC_MAX_RANKS];
    bool ok = true;
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q) {
      if (q < n) {
        if (q == r) v[q] = u == t0 ? first : P::prep(sc_load_unit<DT>(send, u, count, sal));
        else ok = ok && p.recv(c, mine + (size_t)q * slot, u, q, &v[q]);
      } else {
        v[q] = make_uint4(0, 0, 0, 0);
      }
    }
    if (!ok) {
      all_ok = false;
      break;
    }
    sc_store_unit<DT>(recv, u, count, ral, sc_reduce_packs<DT, OP>(v, n, factor));
  }
  if (hcheck && all_ok && sc_match_call(c, ha, hb, (int)threadIdx.x) == 0) {
    if (sc_spin_until(c, (int)threadIdx.x, [&] {
          ha = sc_ld_ll16(hp);
          hb = sc_ld_ll16(hp + 1);
          return ha.y == sc_call_tag(c.call_seq) && ha.w == ha.y && hb.y == ha.y && hb.w == ha.y;
        }))
      (void)sc_match_call(c, ha, hb, (int)threadIdx.x);
  }
}

// LL protocol (small messages): each unit travels as two LL lines whose flags prove arrival. The
// slot of rank q in our staging half holds sc_ll_slot_bytes(units) bytes. Reuse of a half two
// operations later is safe for the same reason as in signal.cuh: completing an operation means
// having received every peer's lines of it, which each peer only sent after finishing its previous
// operation.
struct ScLL {
  uint32_t flag;  // sc_ll_flag(seq, call)
  static constexpr bool kHeaderAtEnd = false;  // the flag carries the call words
  static SC_DEV size_t slot_bytes(size_t units) { return sc_ll_slot_bytes(units); }
  static SC_DEV uint4 prep(uint4 x) { return x; }
  static SC_DEV char* half(const ScDevComm& c, int q, uint64_t seq) { return sc_half(c, q, seq); }
  SC_DEV void push(char* slot, size_t u, uint4 x) const {
    char* d = slot + sc_ll_line0(u);
    sc_st_ll16(d, make_uint4(x.x, flag, x.y, flag));
    sc_st_ll16(d + SC_LL_LINE1, make_uint4(x.z, flag, x.w, flag));
  }
  SC_DEV bool recv(const ScDevComm& c, const char* slot, size_t u, int peer, uint4* out) const {
    return sc_ll_recv(c, slot + sc_ll_line0(u), flag, peer, out);
  }
};

template <int DT, int OP, int NR>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_allreduce_ll(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                  typename ScType<DT>::T* __restrict__ recv, size_t count,
                  typename ScType<DT>::Acc factor) {
  sc_allreduce_oneshot<ScLL, DT, OP, NR>(ScLL{sc_ll_flag(seq, c.call)}, c, seq, send, recv, count, factor);
}

// Tree / two-shot. Units are split into n slices of `su` units (the last may be shorter or
// empty); the slice-relative unit index decides the thread in every phase.
// Staging half layout: n reduce-scatter slots (slot q written by rank q with its copy of our
// slice), then n all-gather slots (slot q written by rank q with its reduced slice q).
//   phase 1: push slice j of own input into RS slot `rank` of rank j (j != rank)
//   barrier 1
//   phase 2: reduce own slice from local RS slots + own input; write the result to recv and
//            push it into AG slot `rank` of every peer
//   barrier 2
//   phase 3: copy AG slots q != rank into recv slice q
template <int DT, int OP>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_allreduce_tree(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                    typename ScType<DT>::T* __restrict__ recv, size_t count,
                    typename ScType<DT>::Acc factor) {
  if (!sc_kernel_begin(c)) return;
  const int n = c.nranks, r = c.rank;
  const size_t units = (count + ScType<DT>::V - 1) / ScType<DT>::V;
  const size_t su = (units + n - 1) / n;
  const size_t slot = su * 16;
  const bool sal = sc_aligned16(send), ral = sc_aligned16(recv);
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  char* mine = sc_half(c, r, seq);

  // phase 1
  for (int jj = 1; jj < n; ++jj) {
    const int j = (r + jj) % n;  // start with the next rank to spread link load
    const size_t base = (size_t)j * su;
    const size_t len = base < units ? min(su, units - base) : 0;
    uint4* dst = (uint4*)(sc_half(c, j, seq) + (size_t)r * slot);
    for (size_t u = t0; u < len; u += stride) dst[u] = sc_load_unit<DT>(send, base + u, count, sal);
  }
  bool ok = sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1);

  // phase 2
  if (ok) {
    const size_t base = (size_t)r * su;
    const size_t len = base < units ? min(su, units - base) : 0;
    uint4* ag[SC_MAX_RANKS];
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q)
      ag[q] = (q < n) ? (uint4*)(sc_half(c, q, seq) + (size_t)(n + r) * slot) : nullptr;
    for (size_t u = t0; u < len; u += stride) {
      uint4 v[SC_MAX_RANKS];
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q) {
        if (q < n) {
          v[q] = (q == r) ? sc_load_unit<DT>(send, base + u, count, sal)
                          : sc_ld16_cg((const uint4*)(mine + (size_t)q * slot) + u);
        } else {
          v[q] = make_uint4(0, 0, 0, 0);
        }
      }
      const uint4 res = sc_reduce_packs<DT, OP>(v, n, factor);
      sc_store_unit<DT>(recv, base + u, count, ral, res);
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < n && q != r) ag[q][u] = res;
    }
    ok = sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 2);
  }

  // phase 3
  if (ok) {
    for (int jj = 1; jj < n; ++jj) {
      const int j = (r + jj) % n;
      const size_t base = (size_t)j * su;
      const size_t len = base < units ? min(su, units - base) : 0;
      const uint4* src = (const uint4*)(mine + (size_t)(n + j) * slot);
      for (size_t u = t0; u < len; u += stride) sc_store_unit<DT>(recv, base + u, count, ral, sc_ld16_cg(src + u));
    }
  }
}
