// Low-precision (FP8 on the wire) collectives: direct access, push style, per-block scales.
//
// The kernels are sequences of whole-run operations (lp_runs.cuh) separated by per-CTA barriers;
// a run operation maps block t to the same CTA in every phase and on every rank (same grid), so
// those barriers cover exactly the blocks a CTA reads (rule 4 of ANCHORS.md). Runs use the wire
// layout of BlockQuantizer (codes | pad to 4 | float32 scales); slots are 16-byte aligned.
#pragma once

#include "lp_runs.cuh"

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)

// Start of slice j of a k-element chunk cut into n slices of whole blocks (HostCommunicator.lpSlice).
SC_DEV size_t sc_lp_slice(size_t k, size_t bs, int n, int j) {
  const size_t nb = (k + bs - 1) / bs;
  const size_t s = (nb * (size_t)j / (size_t)n) * bs;
  return s < k ? s : k;
}

// Slot `idx` of every rank's staging half, peers first (rank + 1, ...) and this rank's own last:
// where a run is pushed so that every rank holds it.
struct ScLpEverySlot {
  char* p[SC_MAX_RANKS];
  SC_DEV ScLpEverySlot(const ScDevComm& c, uint64_t seq, size_t idx, size_t slot) {
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q) p[q] = q < c.nranks ? sc_half(c, (c.rank + 1 + q) % c.nranks, seq) + idx * slot : nullptr;
  }
};
// Slots first .. first + n - 1 of this rank's staging half: the runs ranks 0..n-1 pushed here.
struct ScLpMySlots {
  const char* p[SC_MAX_RANKS];
  SC_DEV ScLpMySlots(const ScDevComm& c, uint64_t seq, size_t first, size_t slot) {
    const char* mine = sc_half(c, c.rank, seq);
#pragma unroll
    for (int q = 0; q < SC_MAX_RANKS; ++q) p[q] = q < c.nranks ? mine + (first + q) * slot : nullptr;
  }
};

// Allreduce, one-shot (up to lp_oneshot_max_ranks ranks; the default is 2). Staging half: n slots
// of `slot` bytes, slot q written by rank q.
//   phase 1: quantize the whole chunk once; push the run into slot `rank` of every rank (peers
//            first, own copy last)
//   barrier
//   phase 2: out = FP32 sum of the dequantized slots 0..n-1 in rank order (AVG: / n)
// One quantization per element (relative L2 error ~2.7% on N(0,1) instead of ~3.9% for the
// two-shot's two). Each rank sends (n-1) * count code bytes: at 2 ranks as much as the two-shot.
//
// Chunk pipelining: a large call runs as several kernels, one per chunk (at least lp_chunks chunks
// of at least lp_chunk_min elements, none larger than a slot: sc_lp_allreduce), and the kernel of
// chunk i+1 (`chained`) runs its phase 1 while chunk i's kernel is in phase 2, so the NVLink pushes
// of one overlap the HBM-bound sum of the other (CUDA PDL; on HIP, stream order runs them one after
// the other, with the same result). With 256-thread blocks two chunks' CTAs share each SM.
// Ordering, for the staging half H = seq % 2 that phase 1 writes:
//   - A kernel triggers its dependents only after its barrier, so chunk i+1 (op seq) starts once
//     every block of op seq-1 passed its barrier.
//   - A chained kernel waits for its predecessor's completion (sc_pdl_wait) before it arrives at
//     its own barrier. So a rank's arrival at op s means its op s-1 finished reading its half.
//   - Our op seq-1 barrier passed => every peer arrived at op seq-1 => every peer finished op seq-2,
//     the last reader of H. So pushing into H before our own predecessor completed is safe.
//   - Phase 1 reads only this chunk's part of `send`, which no kernel of this call writes (chunks of
//     `recv` are disjoint); the first chunk of a call waits for the stream's previous kernel as
//     every kernel does, since that may have written `send`.
//   - A peer still reaches at most op seq+1 before we pass op seq's barrier (its arrival at op
//     seq+1 needs its op seq complete), so the PEER_AHEAD bound of sc_barrier_block holds.
template <int DT, int OP>
__global__ void __launch_bounds__(SC_THREADS)
sc_k_lp_allreduce_oneshot(ScDevComm c, uint64_t seq, const typename ScType<DT>::T* __restrict__ send,
                          typename ScType<DT>::T* __restrict__ recv, size_t count, size_t bs, size_t slot, ScFp8 f,
                          int chained) {
  if (!sc_kernel_begin(c, !chained, false)) return;
  sc_trace(c, seq, 0);
  const int n = c.nranks, L = sc_lp_vec_lanes(bs);
  sc_lp_quantize_run<DT>(send, count, bs, ScLpEverySlot(c, seq, c.rank, slot).p, n, L, f);
  sc_trace(c, seq, 1);
  if (chained) sc_pdl_wait();  // the previous chunk's kernel completed: see above
  if (sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1)) {
    sc_trace(c, seq, 2);
    sc_pdl_launch_dependents();
    sc_lp_sum_run<DT, OP>(ScLpMySlots(c, seq, 0, slot).p, n, count, bs, recv, L, f);
    sc_trace(c, seq, 3);
  }
}

// Allreduce, two-shot. Staging half: n reduce-scatter slots then n all-gather slots of `slot`
// bytes each.
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
  if (!sc_kernel_begin(c)) return;
  const int n = c.nranks, r = c.rank, L = sc_lp_vec_lanes(bs);
  char* const mine = sc_half(c, r, seq);

  for (int jj = 0; jj < n; ++jj) {
    const int j = (r + 1 + jj) % n;  // peers first (own slice last), spreading link load
    const size_t a = sc_lp_slice(count, bs, n, j), len = sc_lp_slice(count, bs, n, j + 1) - a;
    char* const d[SC_MAX_RANKS] = {sc_half(c, j, seq) + (size_t)r * slot};
    sc_lp_quantize_run<DT>(send + a, len, bs, d, 1, L, f);
  }
  bool ok = sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1);

  if (ok) {
    const size_t a = sc_lp_slice(count, bs, n, r), len = sc_lp_slice(count, bs, n, r + 1) - a;
    sc_lp_sum_requantize_run<OP>(ScLpMySlots(c, seq, 0, slot).p, n, len, bs, ScLpEverySlot(c, seq, n + r, slot).p, n, L, f);
    ok = sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 2);
  }

  if (ok) {
    for (int jj = 0; jj < n; ++jj) {
      const int j = (r + jj) % n;
      const size_t a = sc_lp_slice(count, bs, n, j), len = sc_lp_slice(count, bs, n, j + 1) - a;
      sc_lp_dequantize_run<DT>(mine + (size_t)(n + j) * slot, len, bs, recv + a, L, f);
    }
  }
}

enum { SC_LPX_ALLGATHER = 0, SC_LPX_REDUCESCATTER = 1, SC_LPX_ALLTOALL = 2 };

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
  if (!sc_kernel_begin(c)) return;
  const int n = c.nranks, r = c.rank, L = sc_lp_vec_lanes(bs);
  char* const mine = sc_half(c, r, seq);

  if (KIND == SC_LPX_ALLGATHER) {
    sc_lp_quantize_run<DT>(send, k, bs, ScLpEverySlot(c, seq, r, slot).p, n, L, f);
  } else {
    for (int jj = 0; jj < n; ++jj) {
      const int j = (r + 1 + jj) % n;
      char* const d[SC_MAX_RANKS] = {sc_half(c, j, seq) + (size_t)r * slot};
      sc_lp_quantize_run<DT>(send + (size_t)j * send_stride, k, bs, d, 1, L, f);
    }
  }

  if (sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1)) {
    if (KIND == SC_LPX_REDUCESCATTER) {
      sc_lp_sum_run<DT, OP>(ScLpMySlots(c, seq, 0, slot).p, n, k, bs, recv, L, f);
    } else {
      for (int jj = 0; jj < n; ++jj) {
        const int q = (r + jj) % n;
        sc_lp_dequantize_run<DT>(mine + (size_t)q * slot, k, bs, recv + (size_t)q * recv_stride, L, f);
      }
    }
  }
}

#endif  // device compilation
