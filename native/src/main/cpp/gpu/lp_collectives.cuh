// Low-precision (FP8 on the wire) collectives: direct access, push style, per-block scales.
//
// Quantization blocks are handled by groups of 32 lanes; block t of a run goes to group
// t mod G (G = groups in the grid) in every phase and on every rank, so the per-CTA barriers of
// signal.cuh cover exactly the blocks a CTA reads (rule 4 of ANCHORS.md). Runs use the wire
// layout of BlockQuantizer (codes | pad to 4 | float32 scales); slots are 16-byte aligned.
#pragma once

#include "lp_codec.cuh"

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)

// Start of slice j of a k-element chunk cut into n slices of whole blocks (HostCommunicator.lpSlice).
SC_DEV size_t sc_lp_slice(size_t k, size_t bs, int n, int j) {
  const size_t nb = (k + bs - 1) / bs;
  const size_t s = (nb * (size_t)j / (size_t)n) * bs;
  return s < k ? s : k;
}

// Allreduce (two-shot). Staging half: n reduce-scatter slots then n all-gather slots of
// `slot` bytes each.
//   phase 1: quantize slice j of the input (once) into RS slot `rank` of rank j (own slice: own
//            staging)
//   barrier 1
//   phase 2: own slice: dequantize RS slots 0..n-1, FP32 sum in rank order (AVG: / n),
//            requantize once, push the run into AG slot `rank` of every rank
//   barrier 2
//   phase 3: dequantize AG slot j into the output slice j (bf16 rounded to nearest even)
template <int DT, int OP>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_lp_allreduce(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                  typename ScType<DT>::T* __restrict__ recv, size_t count, size_t bs, size_t slot, ScFp8 f) {
  sc_pdl_wait();
  sc_pdl_launch_dependents();
  const int n = c.nranks, r = c.rank;
  const int lane = threadIdx.x & 31;
  const size_t g0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, G = ((size_t)gridDim.x * blockDim.x) >> 5;
  char* mine = sc_half(c, r, seq);

  for (int jj = 0; jj < n; ++jj) {
    const int j = (r + 1 + jj) % n;  // peers first (own slice last), spreading link load
    const size_t a = sc_lp_slice(count, bs, n, j), len = sc_lp_slice(count, bs, n, j + 1) - a;
    const size_t nb = (len + bs - 1) / bs;
    char* const d[SC_MAX_RANKS] = {sc_half(c, j, seq) + (size_t)r * slot};
    const bool sal = sc_lp_aligned<DT>(send + a);
    for (size_t t = g0; t < nb; t += G) sc_lp_quant_block<DT>(send + a, sal, len, bs, t, d, 1, lane, f);
  }
  bool ok = sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1);

  if (ok) {
    const size_t a = sc_lp_slice(count, bs, n, r), len = sc_lp_slice(count, bs, n, r + 1) - a;
    const size_t nb = (len + bs - 1) / bs;
    const char* runs[SC_MAX_RANKS];
    char* dst[SC_MAX_RANKS];
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q) {
      runs[q] = q < n ? mine + (size_t)q * slot : nullptr;
      const int p = (r + 1 + q) % n;  // push to peers first, own copy last
      dst[q] = q < n ? sc_half(c, p, seq) + (size_t)(n + r) * slot : nullptr;
    }
    const char* const(&cruns)[SC_MAX_RANKS] = runs;
    char* const(&cdst)[SC_MAX_RANKS] = dst;
    for (size_t t = g0; t < nb; t += G) sc_lp_sum_requant_block<OP>(cruns, n, len, bs, t, cdst, n, lane, f);
    ok = sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 2);
  }

  if (ok) {
    for (int jj = 0; jj < n; ++jj) {
      const int j = (r + jj) % n;
      const size_t a = sc_lp_slice(count, bs, n, j), len = sc_lp_slice(count, bs, n, j + 1) - a;
      const size_t nb = (len + bs - 1) / bs;
      const bool oal = sc_lp_aligned<DT>(recv + a);
      for (size_t t = g0; t < nb; t += G) sc_lp_deq_block<DT>(mine + (size_t)(n + j) * slot, len, bs, t, recv + a, oal, lane, f);
    }
  }
}

enum { SC_LPX_ALLGATHER = 0, SC_LPX_REDUCESCATTER = 1, SC_LPX_ALLTOALL = 2 };

// FP32 sum of block t over runs (rank order), written to out (reduce-scatter's last step).
template <int DT, int OP>
SC_DEV void sc_lp_sum_block(const char* const (&runs)[SC_MAX_RANKS], int nr, size_t n, size_t bs, size_t t,
                            typename ScType<DT>::T* out, bool oal, int lane, const ScFp8& f) {
  const size_t b0 = t * bs, end = b0 + min(bs, n - b0);
  float v[4];
  for (size_t i = b0 + 4 * (size_t)lane; i < end; i += 128) {
    sc_lp_sum4<OP>(runs, nr, n, t, i, f, v);
    sc_lp_store4<DT>(out, i, end, oal, v);
  }
}

// allGather / reduceScatter / allToAll with one quantization. Chunk of k elements per rank slice;
// staging half: n slots of `slot` bytes, slot q written by rank q. Strides are in elements.
//   ALLGATHER:     quantize send[0..k) once, push into slot `rank` of every rank
//   REDUCESCATTER: quantize send[j*stride ..) into slot `rank` of rank j
//   ALLTOALL:      same as REDUCESCATTER
//   barrier
//   ALLGATHER / ALLTOALL: dequantize slot q into recv[q*stride ..)
//   REDUCESCATTER: recv = FP32 sum over q of dequantized slot q (AVG: / n)
template <int DT, int OP, int KIND>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_lp_exchange(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                 typename ScType<DT>::T* __restrict__ recv, size_t k, size_t send_stride, size_t recv_stride,
                 size_t bs, size_t slot, ScFp8 f) {
  sc_pdl_wait();
  sc_pdl_launch_dependents();
  const int n = c.nranks, r = c.rank;
  const int lane = threadIdx.x & 31;
  const size_t g0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, G = ((size_t)gridDim.x * blockDim.x) >> 5;
  const size_t nb = (k + bs - 1) / bs;
  char* mine = sc_half(c, r, seq);

  if (KIND == SC_LPX_ALLGATHER) {
    char* d[SC_MAX_RANKS];
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q) d[q] = q < n ? sc_half(c, (r + 1 + q) % n, seq) + (size_t)r * slot : nullptr;
    char* const(&cd)[SC_MAX_RANKS] = d;
    const bool sal = sc_lp_aligned<DT>(send);
    for (size_t t = g0; t < nb; t += G) sc_lp_quant_block<DT>(send, sal, k, bs, t, cd, n, lane, f);
  } else {
    for (int jj = 0; jj < n; ++jj) {
      const int j = (r + 1 + jj) % n;
      char* const d[SC_MAX_RANKS] = {sc_half(c, j, seq) + (size_t)r * slot};
      const typename ScType<DT>::T* src = send + (size_t)j * send_stride;
      const bool sal = sc_lp_aligned<DT>(src);
      for (size_t t = g0; t < nb; t += G) sc_lp_quant_block<DT>(src, sal, k, bs, t, d, 1, lane, f);
    }
  }

  if (sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1)) {
    if (KIND == SC_LPX_REDUCESCATTER) {
      const char* runs[SC_MAX_RANKS];
#pragma unroll
      for (int q = 0; q < SC_MAX_RANKS; ++q) runs[q] = q < n ? mine + (size_t)q * slot : nullptr;
      const char* const(&cr)[SC_MAX_RANKS] = runs;
      const bool oal = sc_lp_aligned<DT>(recv);
      for (size_t t = g0; t < nb; t += G) sc_lp_sum_block<DT, OP>(cr, n, k, bs, t, recv, oal, lane, f);
    } else {
      for (int jj = 0; jj < n; ++jj) {
        const int q = (r + jj) % n;
        typename ScType<DT>::T* out = recv + (size_t)q * recv_stride;
        const bool oal = sc_lp_aligned<DT>(out);
        for (size_t t = g0; t < nb; t += G) sc_lp_deq_block<DT>(mine + (size_t)q * slot, k, bs, t, out, oal, lane, f);
      }
    }
  }
}

#endif  // device compilation
