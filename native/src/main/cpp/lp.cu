// Low precision (FP8 on the wire): the LP collectives' chunking and grids, and the codec entry
// points (bit-exact with the Java BlockQuantizer / Fp8Codec).
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/launch.h"

static inline size_t sc_round16(size_t x) { return (x + 15) & ~(size_t)15; }

static int sc_lp_check(sc_comm* c, const void* send, void* recv, int dtype, int op, const char* what) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "%s: communicator is null", what);
  if (dtype != SC_FLOAT32 && dtype != SC_BFLOAT16)
    return sc_fail(SC_ERR_UNSUPPORTED, "%s: low precision takes fp32 or bf16 data, got dtype %d", what, dtype);
  if (op != SC_SUM && op != SC_AVG)
    return sc_fail(SC_ERR_UNSUPPORTED, "%s: low precision supports SUM and AVG only, got op %d", what, op);
  if (!send || !recv) return sc_fail(SC_ERR_INVALID_ARG, "%s: null buffer", what);
  const size_t es = sc_dtype_size(dtype);
  if (((uintptr_t)send % es) || ((uintptr_t)recv % es))
    return sc_fail(SC_ERR_INVALID_ARG, "%s: buffers must be aligned to the element size (%zu)", what, es);
  return SC_OK;
}

// Blocks per slot that fit `nslots` slots of a staging half (0: not even one block).
static size_t sc_lp_blocks_fit(sc_comm* c, size_t nslots) {
  const size_t bs = (size_t)c->p.lp_block_size;
  size_t m = c->half / nslots / (bs + 4);
  while (m > 0 && nslots * sc_round16(sc_lp_run_bytes(m * bs, bs)) > c->half) --m;
  return m;
}

// CTAs for a run operation over `nb` quantization blocks (lanes per block: lp_runs.cuh). The cap is
// lp_max_blocks when set; else max_blocks CTAs' worth of 512-thread blocks for a kernel that runs
// alone (a call of one chunk), and max_blocks CTAs for a call of several chunks, whose chained
// kernels share the SMs (measured: 256 x 256 threads is best alone, 128 x 256 when chained).
static int sc_lp_grid(sc_comm* c, size_t nb, bool alone = false) {
  const size_t bs = (size_t)c->p.lp_block_size, l = bs / 16;
  const bool vec = bs % 16 == 0 && bs <= 512 && (l & (l - 1)) == 0;
  const size_t units = nb * (vec ? l : 32);
  size_t cap = (size_t)c->p.lp_max_blocks;
  if (cap == 0) {
    cap = (size_t)c->p.max_blocks;
    if (alone) cap = cap * SC_THREADS / (size_t)c->p.lp_threads;
    if (cap > SC_MAX_BLOCKS) cap = SC_MAX_BLOCKS;
  }
  const size_t b = (units + (int)c->p.lp_threads - 1) / (int)c->p.lp_threads;
  return (int)(b < 1 ? 1 : (b > cap ? cap : b));
}

static int sc_lp_allreduce(sc_comm* c, const void* send, void* recv, size_t count, int dtype, int op, void* stream) {
  SC_TRY(sc_lp_check(c, send, recv, dtype, op, "sc_allreduce(LP)"));
  if (count == 0) return SC_OK;
  SC_TRY(sc_ready(c));
  SC_TRY(sc_no_capture(c, stream));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const int n = c->nranks;
  const size_t es = sc_dtype_size(dtype), bs = (size_t)c->p.lp_block_size;
  gpuStream_t st = (gpuStream_t)stream;
  if (n == 1) return sc_fail(SC_ERR_UNSUPPORTED, "sc_allreduce(LP): needs 2..8 ranks");
  const ScFp8 f = sc_fp8_format((int)c->p.fp8_format);
  // One-shot: n slots per half, each a whole chunk's run. Two-shot: n reduce-scatter + n all-gather
  // slots, each one rank's slice of the chunk.
  const bool one = n <= (int)c->p.lp_oneshot_max_ranks;
  const size_t m = sc_lp_blocks_fit(c, one ? (size_t)n : 2 * (size_t)n);  // blocks per slot
  if (m == 0) return sc_fail(SC_ERR_UNSUPPORTED, "sc_allreduce(LP): staging half of %zu bytes cannot hold one block of %zu", c->half, bs);
  const size_t slot = sc_round16(sc_lp_run_bytes(m * bs, bs));
  size_t cap = one ? m * bs : m * bs * (size_t)n;
  if (one && (int)c->p.lp_chunks > 1) {  // at least lp_chunks chunks of >= lp_chunk_min elements (whole blocks)
    size_t want = (count + (size_t)c->p.lp_chunks - 1) / (size_t)c->p.lp_chunks;
    if (want < (size_t)c->p.lp_chunk_min) want = (size_t)c->p.lp_chunk_min;
    if (want < cap) cap = (want + bs - 1) / bs * bs;  // <= cap: cap is a multiple of bs
  }
  // A later chunk's kernel reads its part of `send` while the previous chunk writes its part of
  // `recv` (sc_k_lp_allreduce_oneshot): fine in place or disjoint, not when the two partly overlap.
  const char *sb = (const char*)send, *rb = (const char*)recv;
  const bool partial = sb != rb && sb < rb + count * es && rb < sb + count * es;
  for (size_t off = 0; off < count; off += cap) {
    const size_t k = count - off < cap ? count - off : cap;
    const int chained = off > 0 && !partial;  // a later chunk of this call: overlaps the previous chunk's kernel
    const size_t nb = (k + bs - 1) / bs;
    // the grid depends only on settings and count, never on this rank's buffers (not on `partial`):
    // every rank must launch the same grid, or block b here would pair with another block b there
    const int blocks = sc_lp_grid(c, one ? nb : (nb + n - 1) / n, one && k == count);
    const char* s = (const char*)send + off * es;
    char* r = (char*)recv + off * es;
#define SC_LP_AR(DT, OP)                                                                                   \
  do {                                                                                                     \
    if (one) sc_launch(c, sc_k_lp_allreduce_oneshot<DT, OP>, blocks, (int)c->p.lp_threads, st, c->dev, c->seq,   \
                       (const ScType<DT>::T*)s, (ScType<DT>::T*)r, k, bs, slot, f, chained);               \
    else sc_launch(c, sc_k_lp_allreduce<DT, OP>, blocks, (int)c->p.lp_threads, st, c->dev, c->seq,               \
                   (const ScType<DT>::T*)s, (ScType<DT>::T*)r, k, bs, slot, f);                            \
  } while (0)
    if (dtype == SC_FLOAT32) { if (op == SC_SUM) SC_LP_AR(SC_DT_F32, SC_OP_SUM); else SC_LP_AR(SC_DT_F32, SC_OP_AVG); }
    else { if (op == SC_SUM) SC_LP_AR(SC_DT_BF16, SC_OP_SUM); else SC_LP_AR(SC_DT_BF16, SC_OP_AVG); }
#undef SC_LP_AR
    SC_TRY(sc_launch_check(c, "allreduce_lp"));
  }
  return SC_OK;
}

template <int KIND>
static int sc_lp_exchange(sc_comm* c, const void* send, void* recv, size_t count, int dtype, int op, void* stream,
                          const char* what) {
  SC_TRY(sc_lp_check(c, send, recv, dtype, op, what));
  if (count == 0) return SC_OK;
  SC_TRY(sc_ready(c));
  SC_TRY(sc_no_capture(c, stream));
  if (c->nranks < 2) return sc_fail(SC_ERR_UNSUPPORTED, "%s: needs 2..8 ranks", what);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const int n = c->nranks;
  const size_t es = sc_dtype_size(dtype), bs = (size_t)c->p.lp_block_size;
  const size_t m = sc_lp_blocks_fit(c, (size_t)n);
  if (m == 0) return sc_fail(SC_ERR_UNSUPPORTED, "%s: staging half of %zu bytes cannot hold one block of %zu", what, c->half, bs);
  const size_t slot = sc_round16(sc_lp_run_bytes(m * bs, bs));
  const size_t cap = m * bs;
  const ScFp8 f = sc_fp8_format((int)c->p.fp8_format);
  gpuStream_t st = (gpuStream_t)stream;
  // Strides (elements) between rank slices: in send for reducescatter / alltoall, in recv for
  // allgather / alltoall.
  const size_t sstride = KIND == SC_LPX_ALLGATHER ? 0 : count;
  const size_t rstride = KIND == SC_LPX_REDUCESCATTER ? 0 : count;
  for (size_t off = 0; off < count; off += cap) {
    const size_t k = count - off < cap ? count - off : cap;
    const int blocks = sc_lp_grid(c, (k + bs - 1) / bs);
    const char* s = (const char*)send + off * es;
    char* r = (char*)recv + off * es;
#define SC_LP_X(DT, OP) sc_launch(c, sc_k_lp_exchange<DT, OP, KIND>, blocks, (int)c->p.lp_threads, st, c->dev, c->seq, \
                                  (const ScType<DT>::T*)s, (ScType<DT>::T*)r, k, sstride, rstride, bs, slot, f)
    if (dtype == SC_FLOAT32) { if (op == SC_AVG) SC_LP_X(SC_DT_F32, SC_OP_AVG); else SC_LP_X(SC_DT_F32, SC_OP_SUM); }
    else { if (op == SC_AVG) SC_LP_X(SC_DT_BF16, SC_OP_AVG); else SC_LP_X(SC_DT_BF16, SC_OP_SUM); }
#undef SC_LP_X
    SC_TRY(sc_launch_check(c, what));
  }
  return SC_OK;
}

extern "C" int sc_allgather_lp(sc_comm_t c, const void* send, void* recv, size_t count_per_rank, int dtype, void* stream) {
  return sc_lp_exchange<SC_LPX_ALLGATHER>(c, send, recv, count_per_rank, dtype, SC_SUM, stream, "sc_allgather_lp");
}
extern "C" int sc_reducescatter_lp(sc_comm_t c, const void* send, void* recv, size_t recv_count, int dtype, int op,
                                   void* stream) {
  return sc_lp_exchange<SC_LPX_REDUCESCATTER>(c, send, recv, recv_count, dtype, op, stream, "sc_reducescatter_lp");
}
extern "C" int sc_alltoall_lp(sc_comm_t c, const void* send, void* recv, size_t count_per_peer, int dtype, void* stream) {
  return sc_lp_exchange<SC_LPX_ALLTOALL>(c, send, recv, count_per_peer, dtype, SC_SUM, stream, "sc_alltoall_lp");
}

extern "C" int sc_comm_lp_config(sc_comm_t c, int* block_size, int* fp8_format) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "communicator is null");
  if (block_size) *block_size = (int)c->p.lp_block_size;
  if (fp8_format) *fp8_format = (int)c->p.fp8_format;
  return SC_OK;
}

// ---- codec entry points ----
extern "C" size_t sc_lp_encoded_bytes(size_t count, int block_size) {
  if (block_size < 1) return 0;
  return sc_lp_run_bytes(count, (size_t)block_size);
}

static int sc_codec_check(int fmt, int bs, int dtype, const char* what) {
  if (fmt != SC_FP8_E4M3FN && fmt != SC_FP8_E4M3FNUZ) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown fp8 format %d", what, fmt);
  char why[96];
  if (bs >= 0 && !sc_param_accepts(SC_P_lp_block_size, bs, why, sizeof why))
    return sc_fail(SC_ERR_UNSUPPORTED, "%s: block size %d: the GPU kernels take %s", what, bs, why);
  if (dtype != SC_FLOAT32 && dtype != SC_BFLOAT16)
    return sc_fail(SC_ERR_UNSUPPORTED, "%s: dtype %d (fp32 or bf16 only)", what, dtype);
  return SC_OK;
}

static int sc_codec_grid(size_t work, int threads) {
  size_t b = (work + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 4096) b = 4096;
  return (int)b;
}

// Checks of the stand-alone block codec calls, and their grid (0: nothing to do). `run` is the
// encoded side, 4-byte aligned because its scales are floats.
static int sc_block_codec_prep(int fmt, int bs, int dtype, const void* src, const void* dst, const void* run,
                               const char* run_name, size_t count, const char* what, int* grid) {
  *grid = 0;
  SC_TRY(sc_codec_check(fmt, bs, dtype, what));
  if (count == 0) return SC_OK;
  if (!src || !dst) return sc_fail(SC_ERR_INVALID_ARG, "%s: null buffer", what);
  if ((uintptr_t)run % 4) return sc_fail(SC_ERR_INVALID_ARG, "%s: %s must be 4-byte aligned", what, run_name);
  *grid = sc_codec_grid(((count + bs - 1) / bs) * 32, SC_THREADS);
  return SC_OK;
}

extern "C" int sc_quantize(const void* src, size_t count, int dtype, int fmt, int bs, void* dst, void* stream) {
  int grid;
  SC_TRY(sc_block_codec_prep(fmt, bs, dtype, src, dst, dst, "dst", count, "sc_quantize", &grid));
  if (!grid) return SC_OK;
  const ScFp8 f = sc_fp8_format(fmt);
  if (dtype == SC_FLOAT32)
    sc_k_lp_quantize<SC_DT_F32><<<grid, SC_THREADS, 0, (gpuStream_t)stream>>>((const float*)src, count, (size_t)bs, (char*)dst, f);
  else
    sc_k_lp_quantize<SC_DT_BF16><<<grid, SC_THREADS, 0, (gpuStream_t)stream>>>((const uint16_t*)src, count, (size_t)bs, (char*)dst, f);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

extern "C" int sc_dequantize(const void* src, size_t count, int fmt, int bs, void* dst, int dtype, void* stream) {
  int grid;
  SC_TRY(sc_block_codec_prep(fmt, bs, dtype, src, dst, src, "src", count, "sc_dequantize", &grid));
  if (!grid) return SC_OK;
  const ScFp8 f = sc_fp8_format(fmt);
  if (dtype == SC_FLOAT32)
    sc_k_lp_dequantize<SC_DT_F32><<<grid, SC_THREADS, 0, (gpuStream_t)stream>>>((const char*)src, count, (size_t)bs, (float*)dst, f);
  else
    sc_k_lp_dequantize<SC_DT_BF16><<<grid, SC_THREADS, 0, (gpuStream_t)stream>>>((const char*)src, count, (size_t)bs, (uint16_t*)dst, f);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

extern "C" int sc_fp8_encode(const void* src, size_t count, int fmt, void* dst, void* stream) {
  SC_TRY(sc_codec_check(fmt, -1, SC_FLOAT32, "sc_fp8_encode"));
  if (count == 0) return SC_OK;
  if (!src || !dst) return sc_fail(SC_ERR_INVALID_ARG, "sc_fp8_encode: null buffer");
  sc_k_fp8_encode<<<sc_codec_grid(count, 256), 256, 0, (gpuStream_t)stream>>>((const float*)src, count, (uint8_t*)dst, sc_fp8_format(fmt));
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

extern "C" int sc_fp8_decode(const void* src, size_t count, int fmt, void* dst, void* stream) {
  SC_TRY(sc_codec_check(fmt, -1, SC_FLOAT32, "sc_fp8_decode"));
  if (count == 0) return SC_OK;
  if (!src || !dst) return sc_fail(SC_ERR_INVALID_ARG, "sc_fp8_decode: null buffer");
  sc_k_fp8_decode<<<sc_codec_grid(count, 256), 256, 0, (gpuStream_t)stream>>>((const uint8_t*)src, count, (float*)dst, sc_fp8_format(fmt));
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}
