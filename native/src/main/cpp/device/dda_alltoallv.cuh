// DDA allToAllV with device-resident split sizes (AllToAllvDynamic): one kernel launch whatever the
// counts, no host synchronization, capturable into a CUDA/HIP graph.
//
// Protocol (every rank launches the same grid, SC_A2AV_BLOCKS x SC_THREADS):
//   0. Every block writes this rank's size row (counts, offsets, capacities) into its own signal
//      buffer, row slot (call & 1). All blocks store identical values, so the race between them is
//      benign; each block's own release in step 1 covers its own stores.
//   1. Barrier V1. Every block then reads all ranks' rows (the n x n matrix) from the peers' signal
//      buffers and reaches the same verdict on every rank: the sizes are checked globally before
//      any data moves (negative count, send block outside the input, receive overflow, receive
//      offsets out of order). On an error, recvCounts are written, the error record goes to
//      host-mapped memory and no output is touched — on every rank, since all see the same matrix.
//   2. R rounds, R = max over (sender, receiver) of ceil(block bytes / slot bytes), the same on every
//      rank. Round k: push piece k of this rank's block for peer j into slot `rank` of j's staging;
//      barrier; copy piece k of each peer's block from our own staging into the output; barrier
//      (the last one also keeps the next operation of any kind from pushing into a staging buffer
//      that is still being read). The block for ourselves is copied input -> output in round 0.
//
// Epochs: these barriers use their own flag array (vflags) and a per-block epoch counter kept in
// device memory (vepoch[b]), not the host launch counter: the kernel's arguments are the same on
// every call, so a captured graph replays correctly. The counters stay equal across ranks because
// every rank passes the same number of barriers per call (the round count comes from the shared
// matrix). Block b only ever synchronizes with block b of its peers, and every phase maps staging
// units to threads the same way on every rank, so a piece is written and read by same-index blocks.
//
// Staging reuse: before V1 nobody writes staging (a peer may still be reading its own staging for
// the previous operation; passing V1 proves every peer started this call, i.e. finished the last).
// The row slots alternate by call parity: a rank can only write the slot of call c+2 after V1 of
// call c+1, which every rank passes only after it has read the rows of call c.
#pragma once

#include "dda_collectives.cuh"

#define SC_A2AV_BLOCKS 64
// Row layout (int64 words).
#define SC_VROW_IN 0      // input capacity (elements)
#define SC_VROW_OUT 1     // output capacity (elements)
#define SC_VROW_LAYOUT 2  // 0 packed, 1 offsets (slots)
#define SC_VROW_DTYPE 3
#define SC_VROW_SC 4                          // send counts [n]
#define SC_VROW_SO (SC_VROW_SC + SC_MAX_RANKS)  // send offsets [n] (prefix sums when packed)
#define SC_VROW_RO (SC_VROW_SO + SC_MAX_RANKS)  // receive offsets [n] (unused when packed)
// SC_VROW_WORDS (signal.cuh) = SC_VROW_RO + SC_MAX_RANKS

// Status codes: SC_A2AV_* in sparkcomms.h.

struct ScA2avArgs {
  const char* send;
  char* recv;
  const int64_t* send_counts;   // device, n
  const int64_t* send_offsets;  // device, n, or null (packed)
  int64_t* recv_counts;         // device, n (written)
  const int64_t* recv_offsets;  // device, n, or null (packed)
  int64_t in_count, out_count;
  int dtype;
};

SC_DEV uint64_t* sc_vflag(ScSignal* s, int b, int p) { return &s->vflags[b][p].v; }

// Barrier of this block with block b of every peer on the allToAllV flags; the same ordering
// argument as sc_barrier_block (signal.cuh): bar.sync, release store of the epoch into the peer's
// slot, acquire spin on our own slot, bar.sync. These epochs are consecutive, so while this block
// waits at `epoch` a healthy peer's flag is at most epoch + 1 (it cannot pass barrier epoch + 1
// before we arrive there): epoch + 2 or more is a corrupted word, a failure, never an arrival.
SC_DEV bool sc_vbarrier(const ScDevComm& c, uint64_t epoch) {
  __syncthreads();
  int ok = 1;
  const int p = threadIdx.x;
  if (p < c.nranks && p != c.rank) {
    sc_st_release_sys(sc_vflag(c.signal[p], blockIdx.x, c.rank), epoch);
    ok = sc_wait_flag(c, sc_vflag(c.self, blockIdx.x, p), epoch, p, epoch + 2) ? 1 : 0;
  }
  return __syncthreads_and(ok) != 0;
}

// The verdict on the matrix, identical on every rank (fixed scan order). Fills the receive offsets
// of every (sender q -> receiver r) block in roff[q][r] and returns the round count in *rounds.
struct ScA2avVerdict {
  long long code, receiver, sender, count, capacity;
};

SC_DEV ScA2avVerdict sc_a2av_check(const int64_t (*M)[SC_VROW_WORDS], int n, int64_t (*roff)[SC_MAX_RANKS]) {
  ScA2avVerdict v = {SC_A2AV_OK, -1, -1, 0, 0};
  for (int q = 0; q < n; ++q) {
    if (M[q][SC_VROW_DTYPE] != M[0][SC_VROW_DTYPE] || M[q][SC_VROW_LAYOUT] != M[0][SC_VROW_LAYOUT]) {
      v = {SC_A2AV_MISMATCH, q, 0, M[q][SC_VROW_LAYOUT], M[0][SC_VROW_LAYOUT]};
      return v;
    }
  }
  // Receiver-major, like the host backend: receiver r's offsets, then each sender q's block for r
  // (negative count, outside q's input, larger than r's room for it).
  const bool slots = M[0][SC_VROW_LAYOUT] != 0;
  for (int r = 0; r < n; ++r) {
    const int64_t out = M[r][SC_VROW_OUT];
    if (slots) {
      for (int q = 0; q < n; ++q) {
        const int64_t start = M[r][SC_VROW_RO + q], end = q + 1 < n ? M[r][SC_VROW_RO + q + 1] : out;
        if (start < 0 || end < start || end > out) { v = {SC_A2AV_RECV_OFFSETS, r, q, start, end}; return v; }
      }
    }
    int64_t run = 0;
    for (int q = 0; q < n; ++q) {
      const int64_t cnt = M[q][SC_VROW_SC + r], off = M[q][SC_VROW_SO + r], in = M[q][SC_VROW_IN];
      if (cnt < 0) { v = {SC_A2AV_NEGATIVE, r, q, cnt, 0}; return v; }
      if (off < 0 || off > in || cnt > in - off) { v = {SC_A2AV_SEND_RANGE, r, q, cnt, in - off}; return v; }
      const int64_t start = slots ? M[r][SC_VROW_RO + q] : run;
      const int64_t cap = slots ? (q + 1 < n ? M[r][SC_VROW_RO + q + 1] : out) - start : out - run;
      if (cnt > cap) { v = {SC_A2AV_OVERFLOW, r, q, cnt, cap}; return v; }
      roff[q][r] = start;
      run += cnt;
    }
  }
  return v;
}

template <int ES>
__global__ void __launch_bounds__(SC_THREADS) sc_k_alltoallv(ScDevComm c, uint64_t seq, ScA2avArgs a) {
  (void)seq;  // epochs come from vepoch, see above
  if (!sc_kernel_begin(c)) return;
  const int n = c.nranks, r = c.rank, b = blockIdx.x, t = threadIdx.x;
  __shared__ int64_t M[SC_MAX_RANKS][SC_VROW_WORDS];
  __shared__ int64_t roff[SC_MAX_RANKS][SC_MAX_RANKS];
  __shared__ ScA2avVerdict verdict;
  __shared__ uint64_t epoch0, call;
  if (t == 0) {
    epoch0 = c.self->vepoch[b];
    call = c.self->vcall[b];
  }
  __syncthreads();
  uint64_t epoch = epoch0;
  const int slot = (int)(call & 1);

  // 0. publish this rank's row
  int64_t* row = c.self->vrow[slot];
  if (t < n) {
    const int64_t cnt = a.send_counts[t];
    row[SC_VROW_SC + t] = cnt;
    row[SC_VROW_RO + t] = a.recv_offsets ? a.recv_offsets[t] : 0;
    if (a.send_offsets) {
      row[SC_VROW_SO + t] = a.send_offsets[t];
    } else {  // packed: exclusive prefix sum (saturating, so a huge count still fails the range check)
      int64_t s = 0;
      for (int j = 0; j < t; ++j) {
        const int64_t x = a.send_counts[j];
        s = (x < 0 || s > INT64_MAX - x) ? INT64_MAX : s + x;
      }
      row[SC_VROW_SO + t] = s;
    }
  } else if (t == SC_MAX_RANKS) {
    row[SC_VROW_IN] = a.in_count;
    row[SC_VROW_OUT] = a.out_count;
    row[SC_VROW_LAYOUT] = a.send_offsets ? 1 : 0;
    row[SC_VROW_DTYPE] = a.dtype;
  }
  bool ok = sc_vbarrier(c, ++epoch);

  // 1. read the matrix; the acquire in sc_vbarrier made every peer's row (written before its
  //    release) visible to this block
  if (ok) {
    for (int i = t; i < n * SC_VROW_WORDS; i += blockDim.x) {
      const int q = i / SC_VROW_WORDS, w = i % SC_VROW_WORDS;
      M[q][w] = sc_ld_volatile_i64(&c.signal[q]->vrow[slot][w]);
    }
    __syncthreads();
    if (t == 0) verdict = sc_a2av_check(M, n, roff);
    __syncthreads();
    if (b == 0 && t < n) a.recv_counts[t] = M[t][SC_VROW_SC + r];
    if (verdict.code != SC_A2AV_OK) {
      if (b == 0 && t == 0 && c.vstatus[0] == SC_A2AV_OK) {  // first error sticks until the host reads it
        c.vstatus[1] = verdict.receiver;
        c.vstatus[2] = verdict.sender;
        c.vstatus[3] = verdict.count;
        c.vstatus[4] = verdict.capacity;
        sc_fence_system();
        c.vstatus[0] = verdict.code;
        sc_fence_system();
      }
    } else {
      // 2. the rounds
      const size_t slot_bytes = ((2 * c.half_bytes) / (size_t)n) & ~(size_t)127;
      uint64_t rounds = 0;
      for (int q = 0; q < n; ++q)
        for (int j = 0; j < n; ++j)
          if (q != j) {
            const uint64_t bytes = (uint64_t)M[q][SC_VROW_SC + j] * ES;
            const uint64_t k = (bytes + slot_bytes - 1) / slot_bytes;
            if (k > rounds) rounds = k;
          }
      const size_t stride = (size_t)gridDim.x * blockDim.x;
      const size_t t0 = (size_t)b * blockDim.x + t;
      {  // our own block: input -> output directly
        const size_t nb = (size_t)M[r][SC_VROW_SC + r] * ES;
        const char* src = a.send + (size_t)M[r][SC_VROW_SO + r] * ES;
        char* dst = a.recv + (size_t)roff[r][r] * ES;
        const bool sal = sc_aligned16(src), dal = sc_aligned16(dst);
        for (size_t u = t0; u < (nb + 15) / 16; u += stride)
          sc_store_bytes<ES>(dst, u, nb, dal, sc_load_bytes<ES>(src, u, nb, sal));
      }
      for (uint64_t k = 0; k < rounds && ok; ++k) {
        const size_t base = (size_t)k * slot_bytes;
        for (int jj = 1; jj < n; ++jj) {  // push piece k of our block for j into j's slot `r`
          const int j = (r + jj) % n;
          const size_t total = (size_t)M[r][SC_VROW_SC + j] * ES;
          if (total <= base) continue;
          const size_t nb = total - base < slot_bytes ? total - base : slot_bytes;
          const char* src = a.send + (size_t)M[r][SC_VROW_SO + j] * ES + base;
          const bool sal = sc_aligned16(src);
          uint4* dst = (uint4*)(c.staging[j] + (size_t)r * slot_bytes);
          for (size_t u = t0; u < (nb + 15) / 16; u += stride) dst[u] = sc_load_bytes<ES>(src, u, nb, sal);
        }
        ok = sc_vbarrier(c, ++epoch);
        if (!ok) break;
        const char* mine = c.staging[r];
        for (int qq = 1; qq < n; ++qq) {  // copy piece k of q's block for us out of slot q
          const int q = (r + qq) % n;
          const size_t total = (size_t)M[q][SC_VROW_SC + r] * ES;
          if (total <= base) continue;
          const size_t nb = total - base < slot_bytes ? total - base : slot_bytes;
          char* dst = a.recv + (size_t)roff[q][r] * ES + base;
          const bool dal = sc_aligned16(dst);
          const uint4* src = (const uint4*)(mine + (size_t)q * slot_bytes);
          for (size_t u = t0; u < (nb + 15) / 16; u += stride) sc_store_bytes<ES>(dst, u, nb, dal, sc_ld16_cg(src + u));
        }
        ok = sc_vbarrier(c, ++epoch);
      }
    }
  }
  // The counters advance by the barriers actually passed; on a failed wait the communicator is
  // broken anyway (the error word is set and the host aborts it).
  __syncthreads();
  if (t == 0) {
    c.self->vepoch[b] = epoch;
    c.self->vcall[b] = call + 1;
  }
}
