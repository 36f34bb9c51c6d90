// DDA one-shot allreduce, Lamport protocol (small floating-point messages): the data travels once,
// with no flag beside it. The LL protocol (dda_allreduce.cuh) sends a flag with every 4 data bytes,
// twice the bytes on the link; the barrier one-shot sends the data once but pays a release fence
// (a round trip) and a flag trip on top. Here the value itself says whether it arrived.
//
// The Lamport region: SC_LAMPORT_BYTES after the staging buffer (same allocation, same IPC handle),
// two halves by operation parity like staging; in a half, slot q holds rank q's units. Every 32-bit
// word of it holds SC_LAMPORT_EMPTY except while a peer's value for the current operation sits in it.
//   - A sender never writes EMPTY: a word equal to it becomes EMPTY - 1 first (sc_lamport_clean).
//     For fp32 both are NaNs; for bf16/fp16 the pair (0xFFFF, 0xFFFF) becomes (0xFFFE, 0xFFFF), NaNs
//     again. Only a NaN payload changes, and the rank's own contribution gets the same change, so
//     every rank reduces the same values (bit-identical results). Integer and fp64 data have no
//     spare pattern and use LL.
//   - Words are stored and loaded as single-copy-atomic elements (volatile 16-byte accesses of
//     32-bit elements; HIP: 64-bit atomics), so a unit with no EMPTY word holds all of this
//     operation's data for it.
//   - The receiver writes EMPTY back into every unit it consumed, in the same kernel.
//
// Reuse of a half two operations later: peers write the half of operation seq again at seq + 2.
// A peer starts seq + 2 only after finishing seq + 1, which needs our seq + 1 data, which we push
// only from our seq + 1 kernel, after our seq kernel completed (stream order / PDL wait: its EMPTY
// stores, local writes, are performed by then). So those EMPTY stores precede, in our memory, any
// write of seq + 2; a receiver never takes a stale value for a new one. A failed operation leaves
// the region dirty, but a failed communicator refuses every later call (sc_state_check).
// Run and measured on CUDA (2x H200) only. On ROCm the argument leans on the system-scope atomic
// EMPTY stores being performed at kernel end, as LL's does; no AMD GPU has run it.
#pragma once

#include "dda_allreduce.cuh"

#define SC_LAMPORT_EMPTY 0xFFFFFFFFu
#define SC_LAMPORT_BYTES (2ull << 20)
#define SC_LAMPORT_HALF (SC_LAMPORT_BYTES / 2)

// Floating types only (see above).
template <int DT> struct ScLamportOk { enum { value = DT == SC_DT_F32 || DT == SC_DT_BF16 || DT == SC_DT_F16 }; };

SC_DEV uint32_t sc_lamport_word(uint32_t w) { return w == SC_LAMPORT_EMPTY ? SC_LAMPORT_EMPTY - 1 : w; }
SC_DEV uint4 sc_lamport_clean(uint4 x) {
  return make_uint4(sc_lamport_word(x.x), sc_lamport_word(x.y), sc_lamport_word(x.z), sc_lamport_word(x.w));
}
SC_DEV bool sc_lamport_full(uint4 v) {
  return v.x != SC_LAMPORT_EMPTY && v.y != SC_LAMPORT_EMPTY && v.z != SC_LAMPORT_EMPTY && v.w != SC_LAMPORT_EMPTY;
}

SC_DEV char* sc_lamport_half(const ScDevComm& c, int r, uint64_t seq) {
  return c.staging[r] + c.lamport_off + (seq & 1) * SC_LAMPORT_HALF;
}

// Waits until the unit at p (our region, written by rank `peer`) holds no EMPTY word, returns it
// and writes EMPTY back. Bounded like every wait (sc_spin_until).
SC_DEV bool sc_lamport_recv(const ScDevComm& c, char* p, int peer, uint4* out) {
  uint4 v;
  // No back-off between polls: __nanosleep(20) cost 0.1-0.3 us per op at 8-512 KB (2x H200).
  if (!sc_spin_until(c, peer, [&] {
        v = sc_ld_ll16(p);
        return sc_lamport_full(v);
      }))
    return false;
  sc_st_ll16(p, make_uint4(SC_LAMPORT_EMPTY, SC_LAMPORT_EMPTY, SC_LAMPORT_EMPTY, SC_LAMPORT_EMPTY));
  *out = v;
  return true;
}

// The Lamport protocol for sc_allreduce_oneshot (dda_allreduce.cuh). Slot of rank q: units * 16
// bytes (units * 16 * nranks <= SC_LAMPORT_HALF, checked by the host). A unit is cleaned
// (sc_lamport_clean) before it is pushed, and our own contribution gets the same cleaning.
struct ScLamport {
  static constexpr bool kHeaderAtEnd = true;  // no tag in the data: block 0 checks the call headers at the end
  static SC_DEV size_t slot_bytes(size_t units) { return units * 16; }
  static SC_DEV uint4 prep(uint4 x) { return sc_lamport_clean(x); }
  static SC_DEV char* half(const ScDevComm& c, int q, uint64_t seq) { return sc_lamport_half(c, q, seq); }
  SC_DEV void push(char* slot, size_t u, uint4 x) const { sc_st_ll16(slot + u * 16, x); }
  SC_DEV bool recv(const ScDevComm& c, char* slot, size_t u, int peer, uint4* out) const {
    return sc_lamport_recv(c, slot + u * 16, peer, out);
  }
};

template <int DT, int OP, int NR>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_allreduce_lamport(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                       typename ScType<DT>::T* __restrict__ recv, size_t count,
                       typename ScType<DT>::Acc factor) {
  sc_allreduce_oneshot<ScLamport, DT, OP, NR>(ScLamport{}, c, seq, send, recv, count, factor);
}
