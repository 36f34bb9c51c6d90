// Runtime wrappers of the C ABI: devices, memory, copies, streams, events, graphs, the benchmark delay.
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/comm.h"

extern "C" int sc_device_count(int* count) {
  if (!count) return sc_fail(SC_ERR_INVALID_ARG, "count is null");
  int n = 0;
  gpuError_t e = gpuGetDeviceCount(&n);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    *count = 0;
    return sc_fail(SC_ERR_NO_DEVICE, "GPU backend unavailable: %s", gpuGetErrorString(e));
  }
  *count = n;
  return SC_OK;
}

extern "C" int sc_runtime_info(char* buf, int len) {
  if (!buf || len <= 0) return sc_fail(SC_ERR_INVALID_ARG, "buffer is null or empty");
  int n = 0;
  SC_TRY(sc_device_count(&n));
  char arch[64] = "none", name[256] = "none";
  if (n > 0) {
    int dev = 0;
    GPU_TRY(gpuGetDevice(&dev));
#if SC_HIP
    hipDeviceProp_t p;
    GPU_TRY(hipGetDeviceProperties(&p, dev));
    snprintf(arch, sizeof(arch), "%s", p.gcnArchName);
    char* colon = strchr(arch, ':');
    if (colon) *colon = 0;
#else
    cudaDeviceProp p;
    GPU_TRY(cudaGetDeviceProperties(&p, dev));
    snprintf(arch, sizeof(arch), "sm_%d%d", p.major, p.minor);
#endif
    snprintf(name, sizeof(name), "%s", p.name);
  }
  int w = snprintf(buf, (size_t)len, "%s devices=%d arch=%s name=%s abi=%d", SC_RUNTIME_NAME, n, arch,
                   name, SC_ABI_VERSION);
  if (w >= len) return sc_fail(SC_ERR_INVALID_ARG, "buffer too small (%d bytes needed)", w + 1);
  return SC_OK;
}

extern "C" int sc_set_device(int device) {
  GPU_TRY(gpuSetDevice(device));
  return SC_OK;
}
extern "C" int sc_device_synchronize(void) {
  GPU_TRY(gpuDeviceSynchronize());
  return SC_OK;
}

static gpuError_t sc_ipc_open(void** p, gpuIpcMemHandle_t h, unsigned flags) {
  gpuError_t e = gpuIpcOpenMemHandle(p, h, flags);
  if (e == gpuSuccess) ++g_live_ipc;
  return e;
}
static gpuError_t sc_ipc_close(void* p) {
  --g_live_ipc;  // the mapping is gone for us whatever the driver answers
  return gpuIpcCloseMemHandle(p);
}

extern "C" int sc_live_resources(long long* counts) {
  if (!counts) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  counts[0] = g_live_comms.load();
  counts[1] = g_live_ipc.load();
  counts[2] = g_live_allocs.load();
  return SC_OK;
}

extern "C" int sc_malloc(void** ptr, size_t bytes) {
  if (!ptr) return sc_fail(SC_ERR_INVALID_ARG, "ptr is null");
  *ptr = nullptr;
  GPU_TRY(gpuMalloc(ptr, bytes ? bytes : 1));
  ++g_live_allocs;
  return SC_OK;
}
extern "C" int sc_free(void* ptr) {
  if (ptr) {
    GPU_TRY(gpuFree(ptr));
    --g_live_allocs;
  }
  return SC_OK;
}
extern "C" int sc_malloc_host(void** ptr, size_t bytes) {
  if (!ptr) return sc_fail(SC_ERR_INVALID_ARG, "ptr is null");
  *ptr = nullptr;
  GPU_TRY(gpuMallocHost(ptr, bytes ? bytes : 1));
  return SC_OK;
}
extern "C" int sc_free_host(void* ptr) {
  if (ptr) GPU_TRY(gpuFreeHost(ptr));
  return SC_OK;
}
static int sc_copy(void* dst, const void* src, size_t bytes, void* stream, int kind, const char* what) {
  if (bytes == 0) return SC_OK;
  if (!dst || !src) return sc_fail(SC_ERR_INVALID_ARG, "%s: null pointer", what);
  if (stream) {
    GPU_TRY(gpuMemcpyAsync(dst, src, bytes, (decltype(gpuMemcpyDefault))kind, (gpuStream_t)stream));
  } else {
    // NULL stream: complete on return (cudaMemcpy may return before a pageable H2D copy lands,
    // and the legacy stream does not order against non-blocking streams).
    GPU_TRY(gpuMemcpy(dst, src, bytes, (decltype(gpuMemcpyDefault))kind));
    GPU_TRY(gpuStreamSynchronize(0));
  }
  return SC_OK;
}
extern "C" int sc_memcpy_htod(void* dst, const void* src, size_t bytes, void* stream) {
  return sc_copy(dst, src, bytes, stream, gpuMemcpyHostToDevice, "sc_memcpy_htod");
}
extern "C" int sc_memcpy_dtoh(void* dst, const void* src, size_t bytes, void* stream) {
  return sc_copy(dst, src, bytes, stream, gpuMemcpyDeviceToHost, "sc_memcpy_dtoh");
}
extern "C" int sc_memcpy_dtod(void* dst, const void* src, size_t bytes, void* stream) {
  return sc_copy(dst, src, bytes, stream, gpuMemcpyDeviceToDevice, "sc_memcpy_dtod");
}
extern "C" int sc_memset(void* dst, int value, size_t bytes, void* stream) {
  if (bytes == 0) return SC_OK;
  if (!dst) return sc_fail(SC_ERR_INVALID_ARG, "sc_memset: null pointer");
  if (stream) {
    GPU_TRY(gpuMemsetAsync(dst, value, bytes, (gpuStream_t)stream));
  } else {
    GPU_TRY(gpuMemset(dst, value, bytes));
    GPU_TRY(gpuStreamSynchronize(0));  // complete on return (see sc_copy)
  }
  return SC_OK;
}
extern "C" int sc_stream_create(void** stream) {
  if (!stream) return sc_fail(SC_ERR_INVALID_ARG, "stream is null");
  gpuStream_t s;
  GPU_TRY(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  *stream = (void*)s;
  return SC_OK;
}
extern "C" int sc_stream_destroy(void* stream) {
  if (stream) GPU_TRY(gpuStreamDestroy((gpuStream_t)stream));
  return SC_OK;
}
extern "C" int sc_stream_synchronize(void* stream) {
  GPU_TRY(gpuStreamSynchronize((gpuStream_t)stream));
  return SC_OK;
}
extern "C" int sc_event_create(void** event) {
  if (!event) return sc_fail(SC_ERR_INVALID_ARG, "event is null");
  gpuEvent_t e;
  GPU_TRY(gpuEventCreate(&e));
  *event = (void*)e;
  return SC_OK;
}
extern "C" int sc_event_record(void* event, void* stream) {
  if (!event) return sc_fail(SC_ERR_INVALID_ARG, "event is null");
  GPU_TRY(gpuEventRecord((gpuEvent_t)event, (gpuStream_t)stream));
  return SC_OK;
}
extern "C" int sc_event_query(void* event, int* done) {
  if (!event || !done) return sc_fail(SC_ERR_INVALID_ARG, "event or done is null");
  gpuError_t e = gpuEventQuery((gpuEvent_t)event);
  if (e == gpuSuccess) {
    *done = 1;
    return SC_OK;
  }
  if (e == gpuErrorNotReady) {
    (void)gpuGetLastError();
    *done = 0;
    return SC_OK;
  }
  GPU_TRY(e);
  return SC_OK;
}
extern "C" int sc_event_synchronize(void* event) {
  if (!event) return sc_fail(SC_ERR_INVALID_ARG, "event is null");
  GPU_TRY(gpuEventSynchronize((gpuEvent_t)event));
  return SC_OK;
}
extern "C" int sc_event_elapsed_ms(void* start, void* end, float* ms) {
  if (!start || !end || !ms) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  GPU_TRY(gpuEventElapsedTime(ms, (gpuEvent_t)start, (gpuEvent_t)end));
  return SC_OK;
}
extern "C" int sc_event_destroy(void* event) {
  if (event) GPU_TRY(gpuEventDestroy((gpuEvent_t)event));
  return SC_OK;
}

extern "C" int sc_graph_capture_begin(void* stream) {
  if (!stream) return sc_fail(SC_ERR_INVALID_ARG, "graph capture needs a non-default stream");
  GPU_TRY(gpuStreamBeginCapture((gpuStream_t)stream));
  return SC_OK;
}
extern "C" int sc_graph_capture_end(void* stream, void** graph_exec) {
  if (!stream || !graph_exec) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  gpuGraph_t graph = nullptr;
  GPU_TRY(gpuStreamEndCapture((gpuStream_t)stream, &graph));
  gpuGraphExec_t exec = nullptr;
  gpuError_t e = gpuGraphInstantiate(&exec, graph);
  (void)gpuGraphDestroy(graph);
  if (e != gpuSuccess) return sc_fail(SC_ERR_RUNTIME, "graph instantiate: %s", gpuGetErrorString(e));
  *graph_exec = (void*)exec;
  return SC_OK;
}
extern "C" int sc_graph_launch(void* graph_exec, void* stream) {
  if (!graph_exec) return sc_fail(SC_ERR_INVALID_ARG, "null graph");
  GPU_TRY(gpuGraphLaunch((gpuGraphExec_t)graph_exec, (gpuStream_t)stream));
  return SC_OK;
}
extern "C" int sc_graph_destroy(void* graph_exec) {
  if (graph_exec) GPU_TRY(gpuGraphExecDestroy((gpuGraphExec_t)graph_exec));
  return SC_OK;
}

__global__ void sc_k_delay(uint64_t ticks) {
  const uint64_t t0 = sc_now_ticks();
  while (sc_now_ticks() - t0 < ticks) {
  }
}

extern "C" int sc_stream_delay(void* stream, double us) {
  if (us <= 0) return SC_OK;
  if (us > 10e6) return sc_fail(SC_ERR_INVALID_ARG, "delay %.0f us is over 10 s", us);
#if SC_HIP
  int dev = 0;
  GPU_TRY(hipGetDevice(&dev));
  const int khz = sc_hip_wallclock_khz(dev);
  const uint64_t ticks = (uint64_t)(us * khz / 1000.0);
#else
  const uint64_t ticks = (uint64_t)(us * 1000.0);
#endif
  sc_k_delay<<<1, 1, 0, (gpuStream_t)stream>>>(ticks);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}
