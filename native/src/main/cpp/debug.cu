// Test and benchmark hooks (sc_debug_*): compiled only into test builds (SC_DEBUG_HOOKS=1).
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/launch.h"

#include <vector>

// Test hook (sparkcomms.h): the words peer `p` spins on for this rank's arrivals are
// p's flags[b][rank] and vflags[b][rank] (sc_barrier_block / sc_vbarrier: this rank stores its epoch
// there with a release, p acquire-loads its own slot). They live in p's signal buffer, which this
// rank reaches through the mapped pointer c->peer_signal[p]; every block's word is overwritten by a
// strided copy (one uint64_t per block, SC_MAX_RANKS flags apart) from the host, on a non-blocking
// stream of its own: no kernel, nothing ordered after this communicator's queued work.
extern "C" int sc_debug_corrupt_flag(sc_comm_t c, int peer, uint64_t value) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "communicator is null");
  if (!c->connected) return sc_fail(SC_ERR_STATE, "rank %d: communicator not connected (call sc_comm_connect)", c->rank);
  if (peer < 0 || peer >= c->nranks || peer == c->rank)
    return sc_fail(SC_ERR_INVALID_ARG, "sc_debug_corrupt_flag: peer %d is not another rank of 0..%d (this is rank %d)", peer,
                   c->nranks - 1, c->rank);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  uint64_t words[SC_MAX_BLOCKS];
  for (int b = 0; b < SC_MAX_BLOCKS; ++b) words[b] = value;
  ScSignal* s = c->peer_signal[peer];
  const size_t pitch = sizeof(ScFlag) * SC_MAX_RANKS;  // from flags[b][rank] to flags[b + 1][rank]
  gpuStream_t st = nullptr;
  GPU_TRY(gpuStreamCreateWithFlags(&st, gpuStreamNonBlocking));
  gpuError_t e = gpuMemcpy2DAsync(&s->flags[0][c->rank].v, pitch, words, sizeof(uint64_t), sizeof(uint64_t),
                                  SC_MAX_BLOCKS, gpuMemcpyDefault, st);
  if (e == gpuSuccess)
    e = gpuMemcpy2DAsync(&s->vflags[0][c->rank].v, pitch, words, sizeof(uint64_t), sizeof(uint64_t), SC_MAX_BLOCKS,
                         gpuMemcpyDefault, st);
  const char* step = e == gpuSuccess ? "stream synchronize" : "copy";
  // `words` must outlive the copies: wait for the stream even when the second copy was refused
  const gpuError_t w = gpuStreamSynchronize(st);
  if (e == gpuSuccess) e = w;
  const gpuError_t d = gpuStreamDestroy(st);
  if (e == gpuSuccess && d != gpuSuccess) {
    e = d;
    step = "stream destroy";
  }
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    return sc_fail(SC_ERR_RUNTIME, "rank %d: sc_debug_corrupt_flag(peer %d): %s failed: %s (%s)", c->rank, peer, step,
                   gpuGetErrorName(e), gpuGetErrorString(e));
  }
  return SC_OK;
}

// Timeline of the LP one-shot's chunk kernels (sparkcomms.h). Device memory, not host-mapped: the
// kernels update it with atomicMin/atomicMax, which host memory over PCIe does not support.
static int sc_trace_clear(sc_comm* c, size_t ops) {
  std::vector<unsigned long long> init(ops * 8);
  for (size_t i = 0; i < init.size(); i += 2) init[i] = ~0ull;
  GPU_TRY(gpuMemcpy(c->trace, init.data(), init.size() * sizeof(unsigned long long), gpuMemcpyHostToDevice));
  return SC_OK;
}
extern "C" int sc_debug_lp_trace(sc_comm_t c, uint64_t* out, size_t ops) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "communicator is null");
  if (!c->connected) return sc_fail(SC_ERR_STATE, "rank %d: communicator not connected (call sc_comm_connect)", c->rank);
  if (ops > 4096) return sc_fail(SC_ERR_INVALID_ARG, "sc_debug_lp_trace: ops %zu: at most 4096", ops);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  if (out) {
    if (!c->trace || ops != c->dev.trace_ops)
      return sc_fail(SC_ERR_STATE, "sc_debug_lp_trace: not recording %zu operations", ops);
    // the library's streams are non-blocking: a plain copy would not wait for their kernels
    GPU_TRY(gpuDeviceSynchronize());
    GPU_TRY(gpuMemcpy(out, c->trace, ops * 8 * sizeof(uint64_t), gpuMemcpyDeviceToHost));
    return sc_trace_clear(c, ops);
  }
  if (c->trace) (void)gpuFree(c->trace);
  c->trace = nullptr;
  c->dev.trace = nullptr;
  c->dev.trace_ops = 0;
  if (ops == 0) return SC_OK;
  GPU_TRY(gpuMalloc((void**)&c->trace, ops * 8 * sizeof(unsigned long long)));
  SC_TRY(sc_trace_clear(c, ops));
  c->dev.trace = c->trace;
  c->dev.trace_ops = ops;
  return SC_OK;
}
