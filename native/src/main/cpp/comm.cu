// The communicator's lifetime: create (defaults and environment through the parameter table),
// export / connect (peers' blobs validated, their memory opened and checked with a real device read
// and write), options, state, abort and destroy.
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/comm.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

static uint64_t sc_process_token() {
  static uint64_t tok = [] {
    std::random_device rd;
    uint64_t t = ((uint64_t)rd() << 32) ^ rd();
    return t ^ ((uint64_t)getpid() << 17);
  }();
  return tok;
}

// The communicators of this process, for connect: a peer in this same process is found here by the
// identity its blob names, and its memory is taken from its communicator, never from the blob (a
// blob is another party's bytes: an address in it could name any memory of this process).
static std::mutex g_local_mu;
static std::vector<sc_comm*> g_local_comms;

static void sc_local_add(sc_comm* c) {
  std::lock_guard<std::mutex> l(g_local_mu);
  g_local_comms.push_back(c);
}
static void sc_local_remove(sc_comm* c) {
  std::lock_guard<std::mutex> l(g_local_mu);
  g_local_comms.erase(std::remove(g_local_comms.begin(), g_local_comms.end(), c), g_local_comms.end());
}
// Rank p's memory, when the communicator with that identity lives in this process, is rank p of as
// many ranks as ours, on the device the blob names and with staging of our size; else false.
static bool sc_local_peer(const sc_comm* c, uint64_t identity, int p, int device, char** staging, ScSignal** signal) {
  std::lock_guard<std::mutex> l(g_local_mu);
  for (const sc_comm* q : g_local_comms) {
    if (q == c || q->identity != identity) continue;
    if (q->rank != p || q->nranks != c->nranks || q->device != device || q->half != c->half) return false;
    *staging = q->staging;
    *signal = q->signal;
    return true;
  }
  return false;
}

static void sc_free_comm_memory(sc_comm* c) {
  for (int p = 0; p < SC_MAX_RANKS; ++p) {
    if (c->peer_ipc[p]) {
      if (c->peer_staging[p]) (void)sc_ipc_close(c->peer_staging[p]);
      if (c->peer_signal[p]) (void)sc_ipc_close(c->peer_signal[p]);
    }
    c->peer_ipc[p] = false;
  }
  if (c->internal) (void)gpuStreamDestroy(c->internal);
  if (c->staging) (void)gpuFree(c->staging);
  if (c->signal) (void)gpuFree(c->signal);
  if (c->probe_buf) (void)gpuFree(c->probe_buf);
  if (c->trace) (void)gpuFree(c->trace);
  c->trace = nullptr;
  if (c->host_words) (void)gpuFreeHost(c->host_words);
  (void)gpuGetLastError();
}

// E4M3FNUZ on gfx940/941/942 (MI300), E4M3FN elsewhere (NVIDIA, gfx950).
static int sc_arch_fp8_format(int device) {
#if SC_HIP
  hipDeviceProp_t p;
  if (hipGetDeviceProperties(&p, device) != hipSuccess) {
    (void)hipGetLastError();
    return SC_FP8_E4M3FN;
  }
  if (!strncmp(p.gcnArchName, "gfx940", 6) || !strncmp(p.gcnArchName, "gfx941", 6) || !strncmp(p.gcnArchName, "gfx942", 6))
    return SC_FP8_E4M3FNUZ;
  return SC_FP8_E4M3FN;
#else
  (void)device;
  return SC_FP8_E4M3FN;
#endif
}

extern "C" int sc_comm_create(int rank, int nranks, int device, size_t staging_bytes,
                              double timeout_seconds, sc_comm_t* out) {
  if (!out) return sc_fail(SC_ERR_INVALID_ARG, "out is null");
  *out = nullptr;
  if (nranks < 1 || nranks > SC_MAX_RANKS)
    return sc_fail(SC_ERR_INVALID_ARG, "nranks=%d outside 1..%d", nranks, SC_MAX_RANKS);
  if (rank < 0 || rank >= nranks) return sc_fail(SC_ERR_INVALID_ARG, "rank=%d outside 0..%d", rank, nranks - 1);
  int ndev = 0;
  SC_TRY(sc_device_count(&ndev));
  if (device < 0 || device >= ndev)
    return sc_fail(SC_ERR_INVALID_ARG, "device=%d but %d GPU(s) visible", device, ndev);
  ScParams prm;
  char err[512];
  if (sc_params_init(&prm, nranks, err, sizeof err) != 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_comm_create: %s", err);
  if (staging_bytes == 0) staging_bytes = (size_t)prm.staging_bytes;
  staging_bytes = (staging_bytes + 255) & ~(size_t)255;
  if (staging_bytes < (size_t)4096 * nranks || staging_bytes > ((size_t)1 << 40))
    return sc_fail(SC_ERR_INVALID_ARG, "staging_bytes=%zu outside %zu..2^40", staging_bytes, (size_t)4096 * nranks);
  prm.staging_bytes = (long long)staging_bytes;
  if (prm.fp8_format < 0) prm.fp8_format = sc_arch_fp8_format(device);
  ScDeviceGuard g(device);
  if (g.rc) return g.rc;

  sc_comm* c = new sc_comm();
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->p = prm;
  c->half = (staging_bytes / 2) & ~(size_t)127;
  c->timeout_s = timeout_seconds > 0 ? timeout_seconds : 300.0;

  auto bail = [&](int rc) {
    sc_free_comm_memory(c);
    delete c;
    return rc;
  };
  gpuError_t e;
#define CREATE_TRY(call)                                                                     \
  do {                                                                                       \
    e = (call);                                                                              \
    if (e != gpuSuccess) {                                                                   \
      (void)gpuGetLastError();                                                               \
      return bail(sc_fail(SC_ERR_RUNTIME, "sc_comm_create(rank %d, device %d): %s failed: %s", \
                          rank, device, #call, gpuGetErrorString(e)));                       \
    }                                                                                        \
  } while (0)
  CREATE_TRY(gpuStreamCreateWithFlags(&c->internal, gpuStreamNonBlocking));
  // The Lamport region follows the staging buffer in the same allocation (one IPC handle for both).
  CREATE_TRY(gpuMalloc((void**)&c->staging, staging_bytes + SC_LAMPORT_BYTES));
  CREATE_TRY(sc_malloc_signal((void**)&c->signal, sizeof(ScSignal)));
  CREATE_TRY(gpuMemset(c->signal, 0, sizeof(ScSignal)));
  CREATE_TRY(gpuMemset(c->staging, 0, staging_bytes));
  CREATE_TRY(gpuMemset(c->staging + staging_bytes, 0xFF, SC_LAMPORT_BYTES));  // every word SC_LAMPORT_EMPTY
  CREATE_TRY(gpuMalloc((void**)&c->probe_buf, 64));
  CREATE_TRY(gpuHostAllocMapped((void**)&c->host_words, 64 * sizeof(int)));
  memset(c->host_words, 0, 64 * sizeof(int));
  CREATE_TRY(gpuHostGetDevicePointer((void**)&c->dev_words, c->host_words, 0));
  c->identity = sc_process_token() ^ (0x9E3779B97F4A7C15ull * (uint64_t)(rank + 1)) ^
                ((uint64_t)(uintptr_t)c->signal);
  CREATE_TRY(gpuMemcpy(&c->signal->identity, &c->identity, sizeof(uint64_t), gpuMemcpyHostToDevice));
  CREATE_TRY(gpuDeviceSynchronize());
  // IPC handles; failure (e.g. virtual-memory allocations) only rules out cross-process peers.
  c->ipc_ok = gpuIpcGetMemHandle(&c->h_staging, c->staging) == gpuSuccess &&
              gpuIpcGetMemHandle(&c->h_signal, c->signal) == gpuSuccess;
  (void)gpuGetLastError();
#undef CREATE_TRY
  sc_local_add(c);
  *out = c;
  return SC_OK;
}

// A kernel's wait bound in its clock's ticks: the HIP wall clock's (its rate per device), else ns.
static uint64_t sc_timeout_ticks(sc_comm_t c) {
#if SC_HIP
  const int khz = sc_hip_wallclock_khz(c->device);
  return (uint64_t)(c->timeout_s * (double)khz * 1000.0);
#else
  return (uint64_t)(c->timeout_s * 1e9);
#endif
}

// Kernels take c->dev by value at launch, so a new bound applies to the next launch and to none that
// is queued or running.
extern "C" int sc_comm_set_timeout(sc_comm_t c, double seconds) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  if (!(seconds > 0) || seconds > 1e7) return sc_fail(SC_ERR_INVALID_ARG, "timeout %g s outside (0, 1e7]", seconds);
  c->timeout_s = seconds;
  if (c->connected) c->dev.timeout_ticks = sc_timeout_ticks(c);
  return SC_OK;
}

// Options change kernels, grids or staging layouts: set them before sc_comm_export, alike on every
// rank (connect compares the agreed ones). The table says what each accepts.
extern "C" int sc_comm_set_option(sc_comm_t c, const char* key, long long value) {
  if (!c || !key) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  const int id = sc_param_find(key);
  if (id < 0) {
    std::string keys;
    for (int i = 0; i < SC_NPARAMS; ++i) keys += (i ? ", " : "") + std::string(sc_param_info(i).name);
    return sc_fail(SC_ERR_INVALID_ARG, "unknown option '%s' (%s)", key, keys.c_str());
  }
  const ScParamInfo& d = sc_param_info(id);
  if (d.flags & SC_PF_CREATE) return sc_fail(SC_ERR_INVALID_ARG, "option %s is fixed at sc_comm_create", key);
  char why[96];
  if (!sc_param_accepts(id, value, why, sizeof why))
    return sc_fail(SC_ERR_INVALID_ARG, "option %s = %lld: takes %s", key, value, why);
  c->p.v[id] = value;
  return SC_OK;
}

extern "C" int sc_comm_get_option(sc_comm_t c, const char* key, long long* value) {
  if (!c || !key || !value) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  const int id = sc_param_find(key);
  if (id < 0) return sc_fail(SC_ERR_INVALID_ARG, "unknown option '%s'", key);
  *value = c->p.v[id];
  return SC_OK;
}

extern "C" size_t sc_comm_export_size(void) { return (sizeof(ScBlob) + 63) & ~(size_t)63; }

extern "C" int sc_comm_export(sc_comm_t c, void* buf, size_t len) {
  if (!c || !buf) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  if (len < sc_comm_export_size())
    return sc_fail(SC_ERR_INVALID_ARG, "export buffer needs %zu bytes, got %zu", sc_comm_export_size(), len);
  ScBlob b;
  memset(&b, 0, sizeof(b));
  b.magic = SC_BLOB_MAGIC;
  b.version = SC_BLOB_VERSION;
  b.proc_token = sc_process_token();
  b.pid = (int32_t)getpid();
  b.rank = c->rank;
  b.nranks = c->nranks;
  b.device = c->device;
  b.identity = c->identity;
  b.ipc_ok = c->ipc_ok ? 1 : 0;
  if (gpuDeviceGetPCIBusId(b.bus_id, sizeof(b.bus_id), c->device) != gpuSuccess) {
    (void)gpuGetLastError();
    snprintf(b.bus_id, sizeof(b.bus_id), "device%d", c->device);
  }
  b.h_staging = c->h_staging;
  b.h_signal = c->h_signal;
  sc_params_agreed(&c->p, b.settings);
  memset(buf, 0, len);
  memcpy(buf, &b, sizeof(b));
  return SC_OK;
}

extern "C" int sc_comm_connect(sc_comm_t c, const void* all, size_t blob_len) {
  if (!c || !all) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  if (c->connected) return sc_fail(SC_ERR_STATE, "communicator already connected");
  if (blob_len < sizeof(ScBlob)) return sc_fail(SC_ERR_INVALID_ARG, "blob_len %zu < %zu", blob_len, sizeof(ScBlob));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const int n = c->nranks, me = c->rank;
  ScBlob blobs[SC_MAX_RANKS];
  uint64_t mine[SC_NPARAMS];
  sc_params_agreed(&c->p, mine);
  for (int p = 0; p < n; ++p) {
    memcpy(&blobs[p], (const char*)all + (size_t)p * blob_len, sizeof(ScBlob));
    blobs[p].bus_id[sizeof(blobs[p].bus_id) - 1] = 0;  // a peer's text: printed below, must end here
    const ScBlob& b = blobs[p];
    if (b.magic != SC_BLOB_MAGIC || b.version != SC_BLOB_VERSION)
      return sc_fail(SC_ERR_INVALID_ARG, "blob %d is not a sparkcomms v%u blob", p, SC_BLOB_VERSION);
    if (b.rank != p || b.nranks != n)
      return sc_fail(SC_ERR_INVALID_ARG, "blob %d says rank %d of %d, expected rank %d of %d", p, b.rank,
                     b.nranks, p, n);
    for (int i = 0; i < SC_NPARAMS && p != me; ++i)
      if (b.settings[i] != mine[i]) {
        const ScParamInfo& d = sc_param_info(i);
        return sc_fail(SC_ERR_INVALID_ARG, "rank %d has %s%s%s%s = %llu, rank %d has %llu: every rank must use the same value",
                       p, d.name, d.env ? " (" : "", d.env ? d.env : "", d.env ? ")" : "", (unsigned long long)b.settings[i], me,
                       (unsigned long long)mine[i]);
      }
  }
  if (blobs[me].identity != c->identity)
    return sc_fail(SC_ERR_INVALID_ARG, "blob %d is not this communicator's own export", me);

  auto fail_peer = [&](int rc) {
    for (int p = 0; p < n; ++p) {
      if (c->peer_ipc[p]) {
        if (c->peer_staging[p]) (void)sc_ipc_close(c->peer_staging[p]);
        if (c->peer_signal[p]) (void)sc_ipc_close(c->peer_signal[p]);
      }
      c->peer_ipc[p] = false;
      c->peer_staging[p] = nullptr;
      c->peer_signal[p] = nullptr;
    }
    (void)gpuGetLastError();
    return rc;
  };
  const uint64_t tok = sc_process_token();
  for (int p = 0; p < n; ++p) {
    const ScBlob& b = blobs[p];
    c->peer_device[p] = b.device;
    if (p == me) {
      c->peer_staging[p] = c->staging;
      c->peer_signal[p] = c->signal;
      continue;
    }
    if (b.proc_token == tok) {
      // Same process: direct pointers (an IPC open of our own process's memory fails).
      if (b.device != c->device) {
        int can = 0;
        gpuError_t e = gpuDeviceCanAccessPeer(&can, c->device, b.device);
        if (e != gpuSuccess || !can) {
          (void)gpuGetLastError();
          return fail_peer(sc_fail(SC_ERR_PEER,
                                   "rank %d (device %d) cannot access rank %d's device %d directly "
                                   "(no peer access between these GPUs)",
                                   me, c->device, p, b.device));
        }
        e = gpuDeviceEnablePeerAccess(b.device, 0);
        if (e != gpuSuccess && e != gpuErrorPeerAccessAlreadyEnabled) {
          (void)gpuGetLastError();
          return fail_peer(sc_fail(SC_ERR_PEER, "enable peer access device %d -> %d failed: %s", c->device,
                                   b.device, gpuGetErrorString(e)));
        }
        (void)gpuGetLastError();
      }
      if (!sc_local_peer(c, b.identity, p, b.device, &c->peer_staging[p], &c->peer_signal[p]))
        return fail_peer(sc_fail(SC_ERR_PEER,
                                 "rank %d's blob names this process (pid %d) but no live communicator of it that is "
                                 "rank %d of %d on device %d with this staging size",
                                 p, b.pid, p, n, b.device));
    } else {
      if (!b.ipc_ok)
        return fail_peer(sc_fail(SC_ERR_PEER,
                                 "rank %d (pid %d) could not export IPC handles for its buffers; "
                                 "cross-process direct access is impossible",
                                 p, b.pid));
      void* ps = nullptr;
      void* pg = nullptr;
      gpuError_t e = sc_ipc_open(&ps, b.h_staging, gpuIpcMemLazyEnablePeerAccess);
      if (e != gpuSuccess) {
        (void)gpuGetLastError();
        return fail_peer(sc_fail(SC_ERR_PEER,
                                 "rank %d (device %d) cannot open rank %d's staging buffer (pid %d, GPU %s): %s",
                                 me, c->device, p, b.pid, b.bus_id, gpuGetErrorString(e)));
      }
      c->peer_staging[p] = (char*)ps;
      c->peer_ipc[p] = true;
      e = sc_ipc_open(&pg, b.h_signal, gpuIpcMemLazyEnablePeerAccess);
      if (e != gpuSuccess) {
        (void)gpuGetLastError();
        return fail_peer(sc_fail(SC_ERR_PEER,
                                 "rank %d (device %d) cannot open rank %d's signal buffer (pid %d, GPU %s): %s",
                                 me, c->device, p, b.pid, b.bus_id, gpuGetErrorString(e)));
      }
      c->peer_signal[p] = (ScSignal*)pg;
    }
  }
  // Real read/write check of every peer's memory from this GPU.
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    const uint64_t pattern = 0xA5C3000000000000ull ^ ((uint64_t)me << 40) ^ (c->identity & 0xFFFFFFFFFFull);
    uint64_t res[3] = {0, 0, 0};
    sc_k_peer_check<<<1, 32, 0, c->internal>>>(c->peer_signal[p], c->peer_staging[p], me, pattern, c->probe_buf);
    gpuError_t e = gpuGetLastError();
    if (e == gpuSuccess) e = gpuStreamSynchronize(c->internal);
    if (e == gpuSuccess) e = gpuMemcpy(res, c->probe_buf, sizeof(res), gpuMemcpyDeviceToHost);
    if (e != gpuSuccess) {
      (void)gpuGetLastError();
      return fail_peer(sc_fail(SC_ERR_PEER, "peer access check: rank %d (device %d) touching rank %d's memory (device %d) failed: %s",
                               me, c->device, p, blobs[p].device, gpuGetErrorString(e)));
    }
    if (res[0] != blobs[p].identity || res[1] != pattern)
      return fail_peer(sc_fail(SC_ERR_PEER,
                               "peer access check: rank %d (device %d) read wrong data from rank %d (device %d, GPU %s): "
                               "identity %016llx expected %016llx, probe %016llx expected %016llx",
                               me, c->device, p, blobs[p].device, blobs[p].bus_id, (unsigned long long)res[0],
                               (unsigned long long)blobs[p].identity, (unsigned long long)res[1],
                               (unsigned long long)pattern));
  }
  ScDevComm& d = c->dev;
  memset(&d, 0, sizeof(d));
  for (int p = 0; p < n; ++p) {
    d.staging[p] = c->peer_staging[p];
    d.signal[p] = c->peer_signal[p];
  }
  d.self = c->signal;
  d.err = (volatile int*)c->dev_words;
  d.abort_flag = (const volatile int*)(c->dev_words + 16);
  d.vstatus = (volatile long long*)(c->dev_words + 32);  // host words 32..41: allToAllV status
  d.timeout_ticks = sc_timeout_ticks(c);
  d.half_bytes = c->half;
  d.lamport_off = (size_t)c->p.staging_bytes;
  d.rank = me;
  d.nranks = n;
  c->connected = true;
  return SC_OK;
}

// "allreduce(fp32, sum, 4194304 elements, tree)" from call words (sc_call_words); words of a peer
// are untrusted: unknown codes print as numbers.
static void sc_describe_call(const uint32_t w[4], char* out, size_t cap) {
  static const char* coll[] = {"allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "alltoallv", "barrier"};
  static const char* dt[] = {"fp32", "bf16", "fp16", "fp64", "int32", "int64"};
  static const char* ops[] = {"sum", "avg", "min", "max", "product", "premul_sum"};
  if ((w[0] & 0x80000000u) == 0) {
    snprintf(out, cap, "no call this library describes");
    return;
  }
  const unsigned k = w[0] & 0xff, d = (w[0] >> 8) & 0xf, o = (w[0] >> 12) & 0xf, pr = (w[0] >> 16) & 0xf,
                 root = (w[0] >> 20) & 0xff;
  const unsigned long long n = ((unsigned long long)w[2] << 32) | w[1];
  char kb[16], db[16], ob[16];
  snprintf(kb, sizeof(kb), "collective %u", k);
  snprintf(db, sizeof(db), "dtype %u", d);
  snprintf(ob, sizeof(ob), "op %u", o);
  const char* ks = k < 7 ? coll[k] : kb;
  if (w[3] == SC_CALL_REFUSED) {
    snprintf(out, cap, "%s with arguments it refused (its error says why)", ks);
  } else if (k == SC_COLL_BARRIER) {
    snprintf(out, cap, "barrier");
  } else if (k == SC_COLL_ALLREDUCE || k == SC_COLL_REDUCESCATTER) {
    snprintf(out, cap, "%s(%s, %s, %llu elements, %s)", ks, d < 6 ? dt[d] : db, o < 6 ? ops[o] : ob, n, sc_protocol_name((int)pr));
  } else if (k == SC_COLL_BROADCAST) {
    snprintf(out, cap, "%s(%s, %llu elements, root %u, %s)", ks, d < 6 ? dt[d] : db, n, root, sc_protocol_name((int)pr));
  } else if (k == SC_COLL_ALLGATHER && root != 0) {
    // sc_agree: the agreement round of a call composed from others (a direct allGather's root is 0)
    snprintf(out, cap, "the agreement round of a composed call (allgather of %llu int64 words, tag %u)", n, root);
  } else {
    snprintf(out, cap, "%s(%s, %llu elements, %s)", ks, d < 6 ? dt[d] : db, n, sc_protocol_name((int)pr));
  }
}

static int sc_state_check(sc_comm* c) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "communicator is null");
  if (c->aborted) return sc_fail(SC_ERR_ABORTED, "rank %d: communicator was aborted", c->rank);
  volatile int* w = (volatile int*)c->host_words;
  if (w[0] != SC_DEVERR_NONE) {
    if (w[0] == SC_DEVERR_ABORT)
      return sc_fail(SC_ERR_ABORTED, "rank %d: a kernel observed the abort flag (block %d, waiting for rank %d)",
                     w[3], w[1], w[2]);
    if (w[0] == SC_DEVERR_MISMATCH) {
      char mine[96], theirs[96];
      const uint32_t a[4] = {(uint32_t)w[8], (uint32_t)w[9], (uint32_t)w[10], (uint32_t)w[11]};
      const uint32_t b[4] = {(uint32_t)w[4], (uint32_t)w[5], (uint32_t)w[6], (uint32_t)w[7]};
      sc_describe_call(a, mine, sizeof(mine));
      sc_describe_call(b, theirs, sizeof(theirs));
      return sc_fail(SC_ERR_MISMATCH,
                     "ranks disagree: rank %d called %s, rank %d called %s; the communicator is unusable: destroy "
                     "it and create a new one",
                     w[3], mine, w[2], theirs);
    }
    if (w[0] == SC_DEVERR_PEER_FAILED) {
      const int why = w[4];
      if (why == SC_DEVERR_MISMATCH)
        return sc_fail(SC_ERR_MISMATCH,
                       "ranks disagree: rank %d found that its call and rank %d's differ (its error names both "
                       "calls); the communicator is unusable: destroy it and create a new one",
                       w[2], w[3]);
      return sc_fail(why == SC_DEVERR_ABORT ? SC_ERR_ABORTED : SC_ERR_TIMEOUT,
                     "rank %d: rank %d %s; the communicator is unusable: destroy it and create a new one", w[3], w[2],
                     why == SC_DEVERR_ABORT ? "was aborted" : why == SC_DEVERR_TIMEOUT ? "timed out waiting for a peer"
                                                                                        : "failed an operation");
    }
    if (w[0] == SC_DEVERR_PEER_AHEAD)
      return sc_fail(SC_ERR_TIMEOUT,
                     "rank %d: rank %d is already at a later operation: it failed or abandoned this one (block %d); "
                     "the communicator is unusable: destroy it and create a new one",
                     w[3], w[2], w[1]);
    return sc_fail(SC_ERR_TIMEOUT,
                   "rank %d: rank %d did not arrive at a barrier within %.1f s (block %d); the "
                   "communicator is unusable: destroy it and create a new one",
                   w[3], w[2], c->timeout_s, w[1]);
  }
  return SC_OK;
}

extern "C" int sc_comm_check(sc_comm_t c) { return sc_state_check(c); }

extern "C" int sc_comm_abort(sc_comm_t c) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "communicator is null");
  ((volatile int*)c->host_words)[16] = 1;
  c->aborted = true;
  // Taken atomically: an abort from a watchdog thread may race sc_comm_destroy's own teardown.
  vComm vc = c->vcomm ? __atomic_exchange_n(&c->vcomm, (vComm) nullptr, __ATOMIC_SEQ_CST) : nullptr;
  if (vc && sc_vendor_loaded()) {
    // Vendor calls that took the communicator before the exchange finish queuing first (ScVendorUse).
    // Bounded: a call blocked inside the vendor library (e.g. connecting to a dead peer) is what the
    // abort must release, so after 2 s it goes ahead anyway.
    const auto t0 = std::chrono::steady_clock::now();
    while (c->vusers.load() > 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2))
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    return sc_vendor_abort_comm(vc, c->rank, 0);  // serialized, no peer wait
  }
  return SC_OK;
}

extern "C" int sc_comm_destroy(sc_comm_t c) {
  if (!c) return SC_OK;
  sc_local_remove(c);  // first: a communicator of this process that connects from now on cannot find it
  int rc = SC_OK;
  {
    ScDeviceGuard g(c->device);
    bool all_arrived = false;  // the barrier below completed: every rank is in sc_comm_destroy
    if (c->connected && !c->aborted && sc_state_check(c) == SC_OK) {
      // Collective: nobody may still write into our staging when it is freed.
      gpuError_t e = sc_launch_raw(c, sc_k_close_barrier, 1, 32, c->internal, c->dev);
      if (e == gpuSuccess) e = gpuGetLastError();
      c->launch_err = e;
      rc = sc_launch_check(c, "destroy barrier");
      if (rc == SC_OK) {
        e = gpuStreamSynchronize(c->internal);
        if (e != gpuSuccess) rc = sc_fail(SC_ERR_RUNTIME, "destroy barrier: %s", gpuGetErrorString(e));
      }
      if (rc == SC_OK) rc = sc_state_check(c);
      all_arrived = rc == SC_OK;
    }
    vComm vc = c->vcomm ? __atomic_exchange_n(&c->vcomm, (vComm) nullptr, __ATOMIC_ACQ_REL) : nullptr;
    if (vc && sc_vendor_loaded()) {
      // See "vendor communicator teardown": Finalize (collective) only when every rank is known to be
      // here, so that it cannot wait for a rank that will never come; else the peer-free CommAbort.
      const std::string first = rc != SC_OK ? sc_error_text() : std::string();
      const int vrc = all_arrived ? sc_vendor_close_comm(vc, c->rank, c->device, c->timeout_s)
                                  : sc_vendor_abort_comm(vc, c->rank, std::min(std::max(c->timeout_s, 1.0), 1e7));
      if (vrc != SC_OK) {
        if (rc == SC_OK) rc = vrc;
        else sc_fail(rc, "%s; vendor communicator: %s", first.c_str(), sc_error_text());
      }
    }
    sc_free_comm_memory(c);
  }
  std::string keep = rc != SC_OK ? sc_error_text() : std::string();
  delete c;
  if (rc != SC_OK) sc_set_error_text(keep.c_str());
  return rc;
}

static int sc_ready(sc_comm* c) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "communicator is null");
  if (!c->connected) return sc_fail(SC_ERR_STATE, "rank %d: communicator not connected (call sc_comm_connect)", c->rank);
  return sc_state_check(c);
}

// Epochs come from a host-side launch counter, so a captured graph would replay stale epochs.
static bool sc_capturing(void* stream) {
#if SC_HIP
  hipStreamCaptureStatus cs = hipStreamCaptureStatusNone;
  if (hipStreamIsCapturing((gpuStream_t)stream, &cs) != hipSuccess) (void)hipGetLastError();
  return cs != hipStreamCaptureStatusNone;
#else
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing((gpuStream_t)stream, &cs) != cudaSuccess) (void)cudaGetLastError();
  return cs != cudaStreamCaptureStatusNone;
#endif
}

static int sc_no_capture(sc_comm* c, void* stream) {
  if (sc_capturing(stream))
    return sc_fail(SC_ERR_UNSUPPORTED, "rank %d: DDA collectives cannot be captured into a graph yet (use algo VENDOR)", c->rank);
  return SC_OK;
}
