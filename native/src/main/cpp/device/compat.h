// One source, two targets: names and primitives that differ between CUDA and HIP.
// Everything GPU-specific the kernels and the runtime layer use goes through this header.
#pragma once

#include <stdint.h>
#include <stddef.h>

#if defined(__HIP__) || defined(__HIPCC__) || defined(SC_USE_HIP)
#define SC_HIP 1
#include <hip/hip_runtime.h>
#else
#define SC_CUDA 1
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#endif

#if SC_HIP
#define SC_RUNTIME_NAME "hip"
typedef hipError_t gpuError_t;
typedef hipStream_t gpuStream_t;
typedef hipEvent_t gpuEvent_t;
typedef hipIpcMemHandle_t gpuIpcMemHandle_t;
#define gpuSuccess hipSuccess
#define gpuGetErrorString hipGetErrorString
#define gpuGetErrorName hipGetErrorName
#define gpuGetLastError hipGetLastError
#define gpuGetDeviceCount hipGetDeviceCount
#define gpuSetDevice hipSetDevice
#define gpuGetDevice hipGetDevice
#define gpuDeviceSynchronize hipDeviceSynchronize
#define gpuMalloc hipMalloc
#define gpuFree hipFree
#define gpuMallocHost(p, n) hipHostMalloc((p), (n), hipHostMallocDefault)
#define gpuFreeHost hipHostFree
#define gpuHostAllocMapped(p, n) hipHostMalloc((p), (n), hipHostMallocMapped | hipHostMallocPortable)
#define gpuHostGetDevicePointer hipHostGetDevicePointer
#define gpuMemcpyAsync hipMemcpyAsync
#define gpuMemcpy2DAsync hipMemcpy2DAsync
#define gpuMemcpy hipMemcpy
#define gpuMemsetAsync hipMemsetAsync
#define gpuMemset hipMemset
typedef hipGraph_t gpuGraph_t;
typedef hipGraphExec_t gpuGraphExec_t;
#define gpuStreamBeginCapture(s) hipStreamBeginCapture((s), hipStreamCaptureModeThreadLocal)
#define gpuStreamEndCapture hipStreamEndCapture
#define gpuGraphInstantiate(e, g) hipGraphInstantiate((e), (g), nullptr, nullptr, 0)
#define gpuGraphLaunch hipGraphLaunch
#define gpuGraphDestroy hipGraphDestroy
#define gpuGraphExecDestroy hipGraphExecDestroy
#define gpuMemcpyHostToDevice hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define gpuMemcpyDefault hipMemcpyDefault
#define gpuStreamCreateWithFlags hipStreamCreateWithFlags
#define gpuStreamNonBlocking hipStreamNonBlocking
#define gpuStreamDestroy hipStreamDestroy
#define gpuStreamSynchronize hipStreamSynchronize
#define gpuEventCreate hipEventCreate
#define gpuEventRecord hipEventRecord
#define gpuEventQuery hipEventQuery
#define gpuEventSynchronize hipEventSynchronize
#define gpuEventElapsedTime hipEventElapsedTime
#define gpuEventDestroy hipEventDestroy
#define gpuErrorNotReady hipErrorNotReady
#define gpuErrorInvalidValue hipErrorInvalidValue
#define gpuIpcGetMemHandle hipIpcGetMemHandle
#define gpuIpcOpenMemHandle hipIpcOpenMemHandle
#define gpuIpcCloseMemHandle hipIpcCloseMemHandle
#define gpuIpcMemLazyEnablePeerAccess hipIpcMemLazyEnablePeerAccess
#define gpuDeviceCanAccessPeer hipDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define gpuErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define gpuDeviceGetPCIBusId hipDeviceGetPCIBusId
#define gpuPointerGetAttributes hipPointerGetAttributes
typedef hipPointerAttribute_t gpuPointerAttributes;
#define gpuMemoryTypeDevice hipMemoryTypeDevice
#else
#define SC_RUNTIME_NAME "cuda"
typedef cudaError_t gpuError_t;
typedef cudaStream_t gpuStream_t;
typedef cudaEvent_t gpuEvent_t;
typedef cudaIpcMemHandle_t gpuIpcMemHandle_t;
#define gpuSuccess cudaSuccess
#define gpuGetErrorString cudaGetErrorString
#define gpuGetErrorName cudaGetErrorName
#define gpuGetLastError cudaGetLastError
#define gpuGetDeviceCount cudaGetDeviceCount
#define gpuSetDevice cudaSetDevice
#define gpuGetDevice cudaGetDevice
#define gpuDeviceSynchronize cudaDeviceSynchronize
#define gpuMalloc cudaMalloc
#define gpuFree cudaFree
#define gpuMallocHost(p, n) cudaMallocHost((p), (n))
#define gpuFreeHost cudaFreeHost
#define gpuHostAllocMapped(p, n) cudaHostAlloc((p), (n), cudaHostAllocMapped | cudaHostAllocPortable)
#define gpuHostGetDevicePointer cudaHostGetDevicePointer
#define gpuMemcpyAsync cudaMemcpyAsync
#define gpuMemcpy2DAsync cudaMemcpy2DAsync
#define gpuMemcpy cudaMemcpy
#define gpuMemsetAsync cudaMemsetAsync
#define gpuMemset cudaMemset
typedef cudaGraph_t gpuGraph_t;
typedef cudaGraphExec_t gpuGraphExec_t;
#define gpuStreamBeginCapture(s) cudaStreamBeginCapture((s), cudaStreamCaptureModeThreadLocal)
#define gpuStreamEndCapture cudaStreamEndCapture
#define gpuGraphInstantiate(e, g) cudaGraphInstantiate((e), (g), 0)
#define gpuGraphLaunch cudaGraphLaunch
#define gpuGraphDestroy cudaGraphDestroy
#define gpuGraphExecDestroy cudaGraphExecDestroy
#define gpuMemcpyHostToDevice cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define gpuMemcpyDefault cudaMemcpyDefault
#define gpuStreamCreateWithFlags cudaStreamCreateWithFlags
#define gpuStreamNonBlocking cudaStreamNonBlocking
#define gpuStreamDestroy cudaStreamDestroy
#define gpuStreamSynchronize cudaStreamSynchronize
#define gpuEventCreate cudaEventCreate
#define gpuEventRecord cudaEventRecord
#define gpuEventQuery cudaEventQuery
#define gpuEventSynchronize cudaEventSynchronize
#define gpuEventElapsedTime cudaEventElapsedTime
#define gpuEventDestroy cudaEventDestroy
#define gpuErrorNotReady cudaErrorNotReady
#define gpuErrorInvalidValue cudaErrorInvalidValue
#define gpuIpcGetMemHandle cudaIpcGetMemHandle
#define gpuIpcOpenMemHandle cudaIpcOpenMemHandle
#define gpuIpcCloseMemHandle cudaIpcCloseMemHandle
#define gpuIpcMemLazyEnablePeerAccess cudaIpcMemLazyEnablePeerAccess
#define gpuDeviceCanAccessPeer cudaDeviceCanAccessPeer
#define gpuDeviceEnablePeerAccess cudaDeviceEnablePeerAccess
#define gpuErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define gpuDeviceGetPCIBusId cudaDeviceGetPCIBusId
#define gpuPointerGetAttributes cudaPointerGetAttributes
typedef cudaPointerAttributes gpuPointerAttributes;
#define gpuMemoryTypeDevice cudaMemoryTypeDevice
#endif

// ---------------------------------------------------------------------------------------------
// Device-side primitives
// ---------------------------------------------------------------------------------------------
#define SC_DEV __device__ __forceinline__
#define SC_DEV_NOINLINE __device__ __noinline__  // rare paths kept out of the hot code

// Signal-buffer allocation: on ROCm the flags must live in uncached memory so that polling
// sees remote writes without cache maintenance; on CUDA plain device memory is coherent for
// system-scope release/acquire.
static inline gpuError_t sc_malloc_signal(void** p, size_t bytes) {
#if SC_HIP
#ifdef hipDeviceMallocUncached
  return hipExtMallocWithFlags(p, bytes, hipDeviceMallocUncached);
#else  // old headers (ROCm < 5.3): fine-grained is the closest
  return hipExtMallocWithFlags(p, bytes, hipDeviceMallocFinegrained);
#endif
#else
  return cudaMalloc(p, bytes);
#endif
}

#if SC_HIP
// Rate of wall_clock64() in kHz (MI300: 100 MHz).
static inline int sc_hip_wallclock_khz(int dev) {
  int khz = 0;
#if defined(HIP_VERSION) && HIP_VERSION >= 50300000
  if (hipDeviceGetAttribute(&khz, hipDeviceAttributeWallClockRate, dev) != hipSuccess) (void)hipGetLastError();
#else
  (void)dev;
#endif
  return khz > 0 ? khz : 100000;
}
#endif

#if defined(__CUDACC__) || defined(__HIP__) || defined(__HIPCC__)

// Store with release semantics at system scope: every memory operation this thread performed
// (and, by cumulativity, every operation it observed, e.g. via __syncthreads) becomes visible
// to any agent (other GPUs, the host) before the stored value does.
SC_DEV void sc_st_release_sys(uint64_t* p, uint64_t v) {
#if SC_HIP
  __hip_atomic_store(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
#endif
}

// Load with acquire semantics at system scope: operations after it in program order (and, via
// a following __syncthreads, the block's operations) observe everything the releasing agent
// made visible before its release store of the value read here.
SC_DEV uint64_t sc_ld_acquire_sys(const uint64_t* p) {
#if SC_HIP
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#endif
}

// Relaxed load at system scope: used for spinning. Spinning with acquire loads would issue a
// system-scope fence per iteration; on the 2x H200 host that stalled incoming NVLink writes
// (a hang, seen with 128-thread blocks). Spin relaxed, then acquire once.
SC_DEV uint64_t sc_ld_relaxed_sys(const uint64_t* p) {
#if SC_HIP
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  uint64_t v;
  asm volatile("ld.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
#endif
}

// Relaxed volatile load of a host-mapped word (abort / error flags written by the host).
SC_DEV int sc_ld_volatile_i32(const volatile int* p) { return *p; }
SC_DEV int64_t sc_ld_volatile_i64(const int64_t* p) { return *(const volatile int64_t*)p; }

// Time source for timeouts: CUDA %globaltimer (ns); HIP wall_clock64() (constant rate, the
// rate is read on the host with hipDeviceAttributeWallClockRate).
SC_DEV uint64_t sc_now_ticks() {
#if SC_HIP
  return (uint64_t)wall_clock64();
#else
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#endif
}

SC_DEV void sc_fence_system() { __threadfence_system(); }

// 16-byte load that bypasses the (non-coherent) L1: used for staging memory that other GPUs
// write during the kernel. Ordered after the barrier's acquire by the memory model.
SC_DEV uint4 sc_ld16_cg(const uint4* p) {
#if SC_HIP
  return *p;  // staging flags/data are read after a system-scope acquire
#else
  return __ldcg(p);
#endif
}

// LL ("low-latency") lines: 16 bytes = two 8-byte words {data32, flag32}. Each 8-byte word is
// written and read as one unit, so a reader that sees the expected flag in a word also sees
// that word's data: no fence and no separate flag are needed.
SC_DEV void sc_st_ll16(void* p, uint4 v) {
#if SC_HIP
  uint64_t* q = (uint64_t*)p;
  __hip_atomic_store(q, ((uint64_t)v.y << 32) | v.x, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store(q + 1, ((uint64_t)v.w << 32) | v.z, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
#else
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
#endif
}
SC_DEV uint4 sc_ld_ll16(const void* p) {
  uint4 v;
#if SC_HIP
  const uint64_t* q = (const uint64_t*)p;
  uint64_t a = __hip_atomic_load(q, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  uint64_t b = __hip_atomic_load(q + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  v.x = (uint32_t)a; v.y = (uint32_t)(a >> 32); v.z = (uint32_t)b; v.w = (uint32_t)(b >> 32);
#else
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p)
               : "memory");
#endif
  return v;
}

// Programmatic dependent launch (Hopper+): a kernel launched with the PDL attribute may be
// scheduled while the previous kernel in the stream is still running; sc_pdl_wait() blocks until
// that kernel completed and its memory is visible, so stream-order semantics are unchanged and
// only the launch latency overlaps. No-ops without the attribute, before sm_90, and on HIP.
SC_DEV void sc_pdl_wait() {
#if SC_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
SC_DEV void sc_pdl_launch_dependents() {
#if SC_CUDA && defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// fp16 <-> fp32 with round-to-nearest-even.
SC_DEV float sc_h2f(uint16_t h) {
#if SC_HIP
  _Float16 x;
  __builtin_memcpy(&x, &h, 2);
  return (float)x;
#else
  return __half2float(__ushort_as_half(h));
#endif
}
SC_DEV uint16_t sc_f2h(float f) {
#if SC_HIP
  _Float16 x = (_Float16)f;
  uint16_t h;
  __builtin_memcpy(&h, &x, 2);
  return h;
#else
  return __half_as_ushort(__float2half_rn(f));
#endif
}

// bf16 <-> fp32, bit-exact round-to-nearest-even (NaN kept quiet), identical on both targets.
SC_DEV float sc_bf2f(uint16_t b) { return __uint_as_float(((uint32_t)b) << 16); }
SC_DEV uint16_t sc_f2bf(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
// Two fp32 values to one word of two bf16 (hi in the upper half), each rounded exactly as sc_f2bf
// does (checked over all 2^32 inputs on the host), without a branch on CUDA: a NaN selects its
// quieted bits instead of the rounding sum. `x != x` needs IEEE compares: no -ffast-math here.
// This form ran fastest in the one-shots (2x H200): about 0.04 us per op at 256 KB
// ahead of two sc_f2bf calls. A hardware cvt.rn.bf16x2.f32 (same bits for every non-NaN input,
// checked over all 2^32 on the H200) is slower, and so is any out-of-line NaN path: keep calls out
// of the reduction (docs/design.md).
SC_DEV uint32_t sc_bf_round_word(float f) {  // upper 16 bits = the bf16 of f; lower bits are junk
  const uint32_t u = __float_as_uint(f);
  return f != f ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u);
}
SC_DEV uint32_t sc_f2bf2(float hi, float lo) {
  const uint32_t l = sc_bf_round_word(lo), h = sc_bf_round_word(hi);
  return (h & 0xffff0000u) | (l >> 16);
}

#endif  // device compilation
