// The communicator as the library's parts see it: the sc_comm object, its exported blob, the
// device guard, and the helpers the parts share. Internal: only library.cu's parts include it.
#pragma once

#include "../include/sparkcomms.h"
#include "status.h"
#include "param.h"

#include "../device/compat.h"
#include "../device/signal.cuh"
#include "../device/dda_types.cuh"

#include <stdio.h>
#include <string.h>

#include <atomic>
#include <string>

#define GPU_TRY(call)                                                                              \
  do {                                                                                             \
    gpuError_t e_ = (call);                                                                        \
    if (e_ != gpuSuccess) {                                                                        \
      (void)gpuGetLastError();                                                                     \
      return sc_fail(SC_ERR_RUNTIME, "%s failed: %s (%s) [%s:%d]", #call, gpuGetErrorName(e_),     \
                     gpuGetErrorString(e_), __FILE__, __LINE__);                                   \
    }                                                                                              \
  } while (0)

// Makes `dev` current for the scope and restores the caller's device afterwards.
struct ScDeviceGuard {
  int prev = -1;
  int rc = SC_OK;
  explicit ScDeviceGuard(int dev) {
    gpuError_t e = gpuGetDevice(&prev);
    if (e != gpuSuccess) {
      (void)gpuGetLastError();
      rc = sc_fail(SC_ERR_NO_DEVICE, "GPU backend unavailable: cudaGetDevice/hipGetDevice: %s",
                   gpuGetErrorString(e));
      prev = -1;
      return;
    }
    if (prev != dev) {
      e = gpuSetDevice(dev);
      if (e != gpuSuccess) {
        (void)gpuGetLastError();
        rc = sc_fail(SC_ERR_RUNTIME, "set device %d failed: %s", dev, gpuGetErrorString(e));
      }
    }
  }
  ~ScDeviceGuard() {
    if (prev >= 0) (void)gpuSetDevice(prev);
  }
};

// Live resources of this process, for leak checks (sc_live_resources).
static std::atomic<long long> g_live_comms{0}, g_live_ipc{0}, g_live_allocs{0};

typedef void* vComm;  // ncclComm_t / rcclComm_t (vendor.cu)

// What one rank exports for its peers (sc_comm_export) and checks of theirs (sc_comm_connect).
// Every field comes from another party: connect validates each before use and takes no address
// from it (ranks of this very process are found by identity among this process's communicators).
#define SC_BLOB_MAGIC 0x53434231u  // "SCB1"
#define SC_BLOB_VERSION 6u
struct ScBlob {
  uint32_t magic;
  uint32_t version;
  uint64_t proc_token;
  int32_t pid, rank, nranks, device;
  uint64_t identity;  // a peer of this same process is looked up by it (sc_local_peer), never by address
  int32_t ipc_ok;
  char bus_id[64];
  gpuIpcMemHandle_t h_staging;
  gpuIpcMemHandle_t h_signal;
  uint64_t settings[SC_NPARAMS];  // sc_params_agreed(): must match on every rank
};

struct sc_comm {
  sc_comm() { ++g_live_comms; }
  ~sc_comm() { --g_live_comms; }
  sc_comm(const sc_comm&) = delete;
  sc_comm& operator=(const sc_comm&) = delete;
  int rank = 0, nranks = 0, device = 0;
  size_t half = 0;  // bytes of one staging half (calls alternate halves by seq)
  double timeout_s = 300.0;
  ScParams p{};     // every knob (core/params.def)
  char* staging = nullptr;
  ScSignal* signal = nullptr;
  int* host_words = nullptr;  // [0..3] error, [16] abort, [32..41] allToAllV status
  int* dev_words = nullptr;
  uint64_t* probe_buf = nullptr;
  unsigned long long* trace = nullptr;  // sc_debug_lp_trace: device memory, 8 words per operation slot
  uint64_t identity = 0;
  bool connected = false;
  bool aborted = false;
  char* peer_staging[SC_MAX_RANKS] = {};
  ScSignal* peer_signal[SC_MAX_RANKS] = {};
  bool peer_ipc[SC_MAX_RANKS] = {};
  int peer_device[SC_MAX_RANKS] = {};
  ScDevComm dev{};
  gpuError_t launch_err = gpuSuccess;  // result of the last sc_launch
  uint64_t seq = 0;  // operations launched (one per kernel); the kernels' epochs derive from it
  uint32_t call[4] = {};  // call words of the call being enqueued (sc_call_words), copied into each launch
  gpuStream_t internal = nullptr;
  vComm vcomm = nullptr;
  std::atomic<int> vusers{0};  // vendor calls in progress (ScVendorUse); sc_comm_abort waits for them
  bool ipc_ok = false;
  gpuIpcMemHandle_t h_staging{}, h_signal{};
};

// Shared by the parts (defined in comm.cu, enqueue.cu, lp.cu, vendor.cu).
static int sc_state_check(sc_comm* c);
static int sc_ready(sc_comm* c);
static int sc_no_capture(sc_comm* c, void* stream);
static bool sc_capturing(void* stream);
static int sc_check_reduce_args(sc_comm* c, const void* send, void* recv, int dtype, int op, const char* what);
static int sc_lp_allreduce(sc_comm* c, const void* send, void* recv, size_t count, int dtype, int op, void* stream);
static bool sc_lp_eligible(int dtype, int op);
static bool sc_vendor_loaded();
static int sc_vendor_abort_comm(vComm vc, int rank, double wait_s);
static int sc_vendor_close_comm(vComm vc, int rank, int device, double timeout_s);
static int sc_vendor_allreduce(sc_comm* c, const void* s, void* r, size_t n, int dtype, int op, double f, gpuStream_t st);
