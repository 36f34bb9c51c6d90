// DDA allgather, reducescatter, alltoall, broadcast: push into peers' staging slots, one
// barrier, then local reads. Same unit -> thread mapping in every phase (see dda_allreduce.cuh).
#pragma once

#include "dda_types.cuh"

// Byte-unit access for data movers: element size ES (2, 4 or 8); a unit is 16 bytes.
template <int ES> struct ScWord;
template <> struct ScWord<2> { typedef uint16_t W; };
template <> struct ScWord<4> { typedef uint32_t W; };
template <> struct ScWord<8> { typedef uint64_t W; };

template <int ES>
SC_DEV uint4 sc_load_bytes(const char* base, size_t u, size_t nbytes, bool al) {
  typedef typename ScWord<ES>::W W;
  const size_t b0 = u * 16;
  if (al && b0 + 16 <= nbytes) return *(const uint4*)(base + b0);
  union { uint4 u4; W w[16 / ES]; } p;
  p.u4 = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int k = 0; k < 16 / ES; ++k)
    if (b0 + (size_t)k * ES < nbytes) p.w[k] = *(const W*)(base + b0 + (size_t)k * ES);
  return p.u4;
}
template <int ES>
SC_DEV void sc_store_bytes(char* base, size_t u, size_t nbytes, bool al, uint4 v) {
  typedef typename ScWord<ES>::W W;
  const size_t b0 = u * 16;
  if (al && b0 + 16 <= nbytes) {
    *(uint4*)(base + b0) = v;
    return;
  }
  union { uint4 u4; W w[16 / ES]; } p;
  p.u4 = v;
#pragma unroll
  for (int k = 0; k < 16 / ES; ++k)
    if (b0 + (size_t)k * ES < nbytes) *(W*)(base + b0 + (size_t)k * ES) = p.w[k];
}

enum { SC_X_ALLGATHER = 0, SC_X_ALLTOALL = 1, SC_X_BROADCAST = 2 };

// nbytes: bytes per slot (per rank for allgather / alltoall, the whole chunk for broadcast).
// send/recv strides (bytes) locate rank j's slice in the send / recv buffer.
//   ALLGATHER: push send -> slot `rank` of every peer; recv[rank] <- send; after: recv[q] <- slot q
//   ALLTOALL:  push send[j] -> slot `rank` of rank j; recv[rank] <- send[rank]; after: recv[q] <- slot q
//   BROADCAST: root pushes send -> slot 0 of every peer and recv <- send; after: others recv <- slot 0
template <int ES, int KIND>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_exchange(ScDevComm c, uint64_t seq, const char* __restrict__ send, char* __restrict__ recv, size_t nbytes,
              size_t send_stride, size_t recv_stride, int root) {
  if (!sc_kernel_begin(c)) return;
  const int n = c.nranks, r = c.rank;
  const size_t units = (nbytes + 15) / 16;
  const size_t slot = units * 16;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  char* mine = sc_half(c, r, seq);

  if (KIND == SC_X_ALLGATHER || (KIND == SC_X_BROADCAST && r == root)) {
    const int myslot = (KIND == SC_X_BROADCAST) ? 0 : r;
    const bool sal = sc_aligned16(send);
    char* out = recv + (KIND == SC_X_ALLGATHER ? (size_t)r * recv_stride : 0);
    const bool oal = sc_aligned16(out);
    uint4* dst[SC_MAX_RANKS];
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q)
      dst[q] = (q < n) ? (uint4*)(sc_half(c, q, seq) + (size_t)myslot * slot) : nullptr;
    for (size_t u = t0; u < units; u += stride) {
      const uint4 x = sc_load_bytes<ES>(send, u, nbytes, sal);
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q)
        if (q < n && q != r) dst[q][u] = x;
      if (out != send) sc_store_bytes<ES>(out, u, nbytes, oal, x);
    }
  } else if (KIND == SC_X_ALLTOALL) {
    for (int jj = 0; jj < n; ++jj) {
      const int j = (r + jj) % n;
      const char* src = send + (size_t)j * send_stride;
      const bool sal = sc_aligned16(src);
      if (j == r) {
        char* out = recv + (size_t)r * recv_stride;
        const bool oal = sc_aligned16(out);
        for (size_t u = t0; u < units; u += stride)
          sc_store_bytes<ES>(out, u, nbytes, oal, sc_load_bytes<ES>(src, u, nbytes, sal));
      } else {
        uint4* dst = (uint4*)(sc_half(c, j, seq) + (size_t)r * slot);
        for (size_t u = t0; u < units; u += stride) dst[u] = sc_load_bytes<ES>(src, u, nbytes, sal);
      }
    }
  }

  if (sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1)) {
    if (KIND == SC_X_BROADCAST) {
      if (r != root) {
        const bool oal = sc_aligned16(recv);
        for (size_t u = t0; u < units; u += stride)
          sc_store_bytes<ES>(recv, u, nbytes, oal, sc_ld16_cg((const uint4*)mine + u));
      }
    } else {
      for (int jj = 1; jj < n; ++jj) {
        const int q = (r + jj) % n;
        char* out = recv + (size_t)q * recv_stride;
        const bool oal = sc_aligned16(out);
        const uint4* src = (const uint4*)(mine + (size_t)q * slot);
        for (size_t u = t0; u < units; u += stride)
          sc_store_bytes<ES>(out, u, nbytes, oal, sc_ld16_cg(src + u));
      }
    }
  }
}

// Reduce-scatter: send holds n slices of `count` elements at element stride `send_stride`;
// push slice j into slot `rank` of rank j, barrier, reduce own slice from local slots.
template <int DT, int OP>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_reducescatter(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                   typename ScType<DT>::T* __restrict__ recv, size_t count, size_t send_stride,
                   typename ScType<DT>::Acc factor) {
  if (!sc_kernel_begin(c)) return;
  typedef typename ScType<DT>::T T;
  const int n = c.nranks, r = c.rank;
  const size_t units = (count + ScType<DT>::V - 1) / ScType<DT>::V;
  const size_t slot = units * 16;
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  const size_t t0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  char* mine = sc_half(c, r, seq);

  for (int jj = 1; jj < n; ++jj) {
    const int j = (r + jj) % n;
    const T* src = send + (size_t)j * send_stride;
    const bool sal = sc_aligned16(src);
    uint4* dst = (uint4*)(sc_half(c, j, seq) + (size_t)r * slot);
    for (size_t u = t0; u < units; u += stride) dst[u] = sc_load_unit<DT>(src, u, count, sal);
  }
  if (sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1)) {
    const T* own = send + (size_t)r * send_stride;
    const bool sal = sc_aligned16(own), ral = sc_aligned16(recv);
    for (size_t u = t0; u < units; u += stride) {
      uint4 v[SC_MAX_RANKS];
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q) {
        if (q < n) {
          v[q] = (q == r) ? sc_load_unit<DT>(own, u, count, sal)
                          : sc_ld16_cg((const uint4*)(mine + (size_t)q * slot) + u);
        } else {
          v[q] = make_uint4(0, 0, 0, 0);
        }
      }
      sc_store_unit<DT>(recv, u, count, ral, sc_reduce_packs<DT, OP>(v, n, factor));
    }
  }
}
