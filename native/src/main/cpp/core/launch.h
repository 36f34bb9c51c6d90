// Kernel launches of the communicator: programmatic dependent launch where available, the launch
// counter (the kernels' epochs) and grid sizing. Internal (library.cu's parts).
#pragma once

#include "comm.h"

static int sc_launch_check(sc_comm* c, const char* what) {
  gpuError_t e = c->launch_err;
  c->launch_err = gpuSuccess;
  if (e != gpuSuccess)
    return sc_fail(SC_ERR_RUNTIME, "rank %d: launch of %s failed: %s (%s)", c->rank, what, gpuGetErrorName(e),
                   gpuGetErrorString(e));
  return SC_OK;
}

// Launches a communicator kernel, with programmatic dependent launch where available.
// The launch counter (the kernels' epochs) advances only when the launch was accepted, and a
// refused launch is reported (never silently skipped: ranks' counters must stay equal).
template <typename... KArgs, typename... Args>
static gpuError_t sc_launch_raw(sc_comm* c, void (*k)(KArgs...), int grid, int block, gpuStream_t st, Args... args);

// Every kernel launched here exchanges data with its peers and carries the call words of the entry
// point that launched it (sc_call_words) and its operation number: its block 0 publishes them as the
// call header its peers check (signal.cuh, "Call headers"). An entry point that forgot to set them
// is a bug of this library, refused here rather than launched without a header.
template <typename... KArgs, typename... Args>
static void sc_launch(sc_comm* c, void (*k)(KArgs...), int grid, int block, gpuStream_t st, ScDevComm dev, uint64_t seq,
                      Args... args) {
  (void)seq;
  if (c->call[0] == 0) {
    c->launch_err = gpuErrorInvalidValue;
    return;
  }
  for (int i = 0; i < 4; ++i) dev.call[i] = c->call[i];
  dev.call_seq = c->seq;
  gpuError_t e = sc_launch_raw(c, k, grid, block, st, dev, c->seq, args...);
  if (e == gpuSuccess) e = gpuGetLastError();
  if (e == gpuSuccess) ++c->seq;
  c->launch_err = e;
}

template <typename... KArgs, typename... Args>
static gpuError_t sc_launch_raw(sc_comm* c, void (*k)(KArgs...), int grid, int block, gpuStream_t st, Args... args) {
#if SC_CUDA
  if (c->p.pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)grid);
    cfg.blockDim = dim3((unsigned)block);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = st;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
  }
#endif
  k<<<grid, block, 0, st>>>(((KArgs)args)...);
  return gpuGetLastError();
}

// The call words of one call: what every rank must agree on (collective, element type, reduction,
// protocol, root, element count). Packed so that the host can print a peer's call from them.
#define SC_CALL_REFUSED 1u  // call[3]: the rank refused its own arguments (sc_refuse)
static void sc_call_words(sc_comm* c, int collective, size_t count, int dtype, int op, int root, int proto) {
  c->call[0] = 0x80000000u | (uint32_t)(collective & 0xff) | ((uint32_t)(dtype & 0xf) << 8) |
               ((uint32_t)(op & 0xf) << 12) | ((uint32_t)(proto & 0xf) << 16) | ((uint32_t)(root & 0xff) << 20);
  c->call[1] = (uint32_t)count;
  c->call[2] = (uint32_t)((uint64_t)count >> 32);
  c->call[3] = 0;
}

static int sc_launch_barrier(sc_comm* c, gpuStream_t s) {
  sc_launch(c, sc_k_barrier, 1, 32, s, c->dev, c->seq);
  return sc_launch_check(c, "barrier");
}

static int sc_blocks_for(sc_comm* c, size_t units, int threads = 0) {
  if (threads <= 0) threads = (int)c->p.threads;
  size_t b = (units + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > (size_t)c->p.max_blocks) b = (size_t)c->p.max_blocks;
  return (int)b;
}
