// The vendor library (NCCL on CUDA, RCCL on HIP): dlopen, the vendor communicator's
// lifetime and teardown, and the collectives of algo VENDOR.
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/comm.h"
#include "core/dl.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

typedef int vResult;  // ncclResult_t
typedef void* vComm;  // ncclComm_t
typedef int vOp;      // ncclRedOp_t
typedef struct { char internal[128]; } vUniqueId;

struct ScVendor {
  void* h = nullptr;
  std::string why;
  const char* name = nullptr;
  vResult (*GetVersion)(int*) = nullptr;
  const char* (*GetErrorString)(vResult) = nullptr;
  vResult (*GetUniqueId)(vUniqueId*) = nullptr;
  vResult (*CommInitRank)(vComm*, int, vUniqueId, int) = nullptr;
  vResult (*CommDestroy)(vComm) = nullptr;
  vResult (*CommAbort)(vComm) = nullptr;
  vResult (*CommFinalize)(vComm) = nullptr;  // optional: NCCL >= 2.14 and RCCL have it; null if absent
  // optional (NCCL >= 2.14, RCCL): non-blocking communicators, which sc_vgroup_* need
  vResult (*CommInitRankConfig)(vComm*, int, vUniqueId, int, void*) = nullptr;
  vResult (*CommGetAsyncError)(vComm, vResult*) = nullptr;
  vResult (*AllReduce)(const void*, void*, size_t, int, vOp, vComm, gpuStream_t) = nullptr;
  vResult (*AllGather)(const void*, void*, size_t, int, vComm, gpuStream_t) = nullptr;
  vResult (*ReduceScatter)(const void*, void*, size_t, int, vOp, vComm, gpuStream_t) = nullptr;
  vResult (*Broadcast)(const void*, void*, size_t, int, int, vComm, gpuStream_t) = nullptr;
  vResult (*RedOpCreatePreMulSum)(vOp*, void*, int, int, vComm) = nullptr;
  vResult (*RedOpDestroy)(vOp, vComm) = nullptr;
  vResult (*Send)(const void*, size_t, int, int, vComm, gpuStream_t) = nullptr;
  vResult (*Recv)(void*, size_t, int, int, vComm, gpuStream_t) = nullptr;
  vResult (*GroupStart)() = nullptr;
  vResult (*GroupEnd)() = nullptr;
};
static ScVendor g_vendor;
static std::once_flag g_vendor_once;

static void sc_vendor_load() {
  const char* env = getenv("SPARKCOMMS_VENDOR_LIB");
#if SC_HIP
  const char* cands[] = {env, "librccl.so.1", "librccl.so"};
  const char* pre = "nccl";  // RCCL exports the nccl* names
#else
  const char* cands[] = {env, "libnccl.so.2", "libnccl.so"};
  const char* pre = "nccl";
#endif
  std::string errs;
  g_vendor.h = sc_dlopen_first(cands, sizeof cands / sizeof cands[0], &g_vendor.name, &errs);
  if (!g_vendor.h) {
    g_vendor.why = "vendor collective library not loadable (" + errs + ")";
    return;
  }
  bool ok = true;
  auto sym = [&](const char* s) -> void* {
    std::string full = std::string(pre) + s;
    void* p = dlsym(g_vendor.h, full.c_str());
    if (!p) {
      ok = false;
      g_vendor.why += "missing symbol " + full + "; ";
    }
    return p;
  };
  *(void**)&g_vendor.GetVersion = sym("GetVersion");
  *(void**)&g_vendor.GetErrorString = sym("GetErrorString");
  *(void**)&g_vendor.GetUniqueId = sym("GetUniqueId");
  *(void**)&g_vendor.CommInitRank = sym("CommInitRank");
  *(void**)&g_vendor.CommDestroy = sym("CommDestroy");
  *(void**)&g_vendor.CommAbort = sym("CommAbort");
  *(void**)&g_vendor.AllReduce = sym("AllReduce");
  *(void**)&g_vendor.AllGather = sym("AllGather");
  *(void**)&g_vendor.ReduceScatter = sym("ReduceScatter");
  *(void**)&g_vendor.Broadcast = sym("Broadcast");
  *(void**)&g_vendor.RedOpCreatePreMulSum = sym("RedOpCreatePreMulSum");
  *(void**)&g_vendor.RedOpDestroy = sym("RedOpDestroy");
  *(void**)&g_vendor.Send = sym("Send");
  *(void**)&g_vendor.Recv = sym("Recv");
  *(void**)&g_vendor.GroupStart = sym("GroupStart");
  *(void**)&g_vendor.GroupEnd = sym("GroupEnd");
  // Optional: without it, teardown falls back to a plain (serialized) CommDestroy.
  *(void**)&g_vendor.CommFinalize = dlsym(g_vendor.h, (std::string(pre) + "CommFinalize").c_str());
  *(void**)&g_vendor.CommInitRankConfig = dlsym(g_vendor.h, (std::string(pre) + "CommInitRankConfig").c_str());
  *(void**)&g_vendor.CommGetAsyncError = dlsym(g_vendor.h, (std::string(pre) + "CommGetAsyncError").c_str());
  if (!ok) {
    dlclose(g_vendor.h);
    g_vendor.h = nullptr;
    g_vendor.why = std::string("vendor library ") + g_vendor.name + " unusable: " + g_vendor.why;
  }
}

static bool sc_vendor_loaded() { return g_vendor.h != nullptr; }

static bool sc_vendor_ready() {
  std::call_once(g_vendor_once, sc_vendor_load);
  if (!g_vendor.h) {
    sc_fail(SC_ERR_VENDOR, "%s", g_vendor.why.c_str());
    return false;
  }
  return true;
}

extern "C" int sc_vendor_available(void) { return sc_vendor_ready() ? 1 : 0; }
extern "C" int sc_vendor_version(int* v) {
  if (!v) return sc_fail(SC_ERR_INVALID_ARG, "version is null");
  if (!sc_vendor_ready()) return SC_ERR_VENDOR;
  vResult r = g_vendor.GetVersion(v);
  if (r != 0) return sc_fail(SC_ERR_VENDOR, "ncclGetVersion: %s", g_vendor.GetErrorString(r));
  return SC_OK;
}
extern "C" int sc_vendor_unique_id_size(void) { return (int)sizeof(vUniqueId); }
extern "C" int sc_vendor_unique_id(void* buf, int len) {
  if (!buf || len < (int)sizeof(vUniqueId))
    return sc_fail(SC_ERR_INVALID_ARG, "unique id buffer needs %d bytes", (int)sizeof(vUniqueId));
  if (!sc_vendor_ready()) return SC_ERR_VENDOR;
  vUniqueId id;
  vResult r = g_vendor.GetUniqueId(&id);
  if (r != 0) return sc_fail(SC_ERR_VENDOR, "ncclGetUniqueId: %s", g_vendor.GetErrorString(r));
  memcpy(buf, &id, sizeof(id));
  return SC_OK;
}

static int sc_vendor_dtype(int dt) {
  switch (dt) {
    case SC_FLOAT32: return 7;   // ncclFloat32
    case SC_BFLOAT16: return 9;  // ncclBfloat16
    case SC_FLOAT16: return 6;   // ncclFloat16
    case SC_FLOAT64: return 8;   // ncclFloat64
    case SC_INT32: return 2;     // ncclInt32
    case SC_INT64: return 4;     // ncclInt64
    default: return -1;
  }
}

// ---- vendor communicator teardown ----
// Bug this answers: two rank threads of one process (one GPU each, each with its own CommInitRank
// communicator) closing at the same time died with SIGSEGV (null pointer) inside ncclCommDestroy
// (NCCL 2.28.3). The ranks of one NCCL communicator that live in the same process are linked
// (intraComm0/intraNext in NCCL's src/init.cc), and it is the LAST CommDestroy/CommAbort of them in
// the process that frees every one of their ncclComm structures (commReclaim -> commCleanup), after
// running the finalize step itself, in helper threads, for ranks that were not finalized. So these
// communicators are not independent objects: while one rank thread is still inside its
// CommDestroy/CommAbort, the other rank's call may free that rank's communicator under it. NCCL only
// allows concurrent calls on independent communicators ("Thread Safety" in the user guide).
// The documented teardown is CommFinalize, then CommDestroy (nccl.h: Finalize flushes and waits until
// the communicator is globally quiescent; Destroy then frees the rest locally, without blocking);
// NVIDIA's one-device-per-pthread example does exactly that in each rank thread.
//
// Ordering used here (rank order does not matter):
//  1. CommFinalize runs in every rank thread concurrently, NOT under the mutex below: it is collective
//     (an intra-node barrier with the other local ranks), so serializing it would deadlock two rank
//     threads of one process.
//  2. CommDestroy and CommAbort run one at a time in the whole process, under g_vendor_teardown_mu.
//     After a Finalize they are local and short, and whichever rank comes last frees all ranks'
//     structures while no other thread is inside NCCL's teardown. CommAbort never waits for peers, so
//     holding the mutex keeps sc_comm_abort immediate up to one other rank's short Destroy/Abort.
//  3. Finalize waits for the peers, so (a) sc_comm_destroy attempts it only when its DDA barrier (bounded
//     by the communicator's timeout) has just shown that every rank reached sc_comm_destroy; otherwise
//     (timed out, aborted, never connected) it uses CommAbort; and (b) Finalize+Destroy run on a worker
//     thread that the caller waits for at most the communicator's timeout: past that it returns
//     SC_ERR_TIMEOUT and leaves the vendor communicator to the worker (destroyed if Finalize ever
//     returns, leaked otherwise) instead of hanging.
//  4. After its Destroy, a rank waits (host side, bounded like 3b) until every rank of the same vendor
//     communicator in this process has destroyed or aborted it. The last Destroy frees the other ranks'
//     NCCL memory with cudaFree on THEIR devices, which waits for those devices to go idle; a rank
//     that had already returned and launched its next spinning kernel (e.g. the DDA barrier of the
//     next communicator it closes, waiting for the rank that is still inside Destroy) deadlocked that
//     (seen on 2x H200, NCCL 2.28.9: closing three communicators per rank in a row hung at the first).
//     The in-process ranks are found by the unique id they were created with (sc_vendor_comm_init).
//  Without CommFinalize (NCCL < 2.14, where it first appeared) step 1 is skipped: serialized
//  CommDestroy calls are still safe, as NCCL's last Destroy completes the other ranks' teardown itself
//  and none of them waits for another rank thread's Destroy.
static std::mutex g_vendor_teardown_mu;

// The ranks of one vendor communicator that live in this process (item 4 above).
struct ScVendorClique {
  std::mutex mu;
  std::condition_variable cv;
  int members = 0;  // ranks of this process that entered CommInitRank with this id
  int done = 0;     // of them, those whose Destroy/Abort returned
};
static std::mutex g_cliques_mu;
static std::map<std::string, std::shared_ptr<ScVendorClique>> g_clique_by_id;  // until init returns
static std::map<vComm, std::shared_ptr<ScVendorClique>> g_clique_of;            // until teardown

// Before CommInitRank: every rank of this process joins before any CommInitRank can return.
static std::shared_ptr<ScVendorClique> sc_clique_join(const vUniqueId& id) {
  std::lock_guard<std::mutex> lk(g_cliques_mu);
  auto& q = g_clique_by_id[std::string(id.internal, sizeof(id.internal))];
  if (!q) q = std::make_shared<ScVendorClique>();
  std::lock_guard<std::mutex> lq(q->mu);
  ++q->members;
  return q;
}
// After CommInitRank: ok -> remember the clique of vc (all members have joined by now); failed -> leave.
static void sc_clique_init_done(const vUniqueId& id, const std::shared_ptr<ScVendorClique>& q, vComm vc, bool ok) {
  std::lock_guard<std::mutex> lk(g_cliques_mu);
  g_clique_by_id.erase(std::string(id.internal, sizeof(id.internal)));
  if (ok) {
    g_clique_of[vc] = q;
  } else {
    std::lock_guard<std::mutex> lq(q->mu);
    --q->members;
    q->cv.notify_all();
  }
}
// Before this rank's Destroy/Abort: forget vc's clique. It must happen before, because the last
// Destroy/Abort of the process frees every sibling's communicator, after which vc is a dangling
// key that a new CommInitRank may reuse.
static std::shared_ptr<ScVendorClique> sc_clique_detach(vComm vc) {
  std::lock_guard<std::mutex> lk(g_cliques_mu);
  auto it = g_clique_of.find(vc);
  if (it == g_clique_of.end()) return nullptr;
  std::shared_ptr<ScVendorClique> q = it->second;
  g_clique_of.erase(it);
  return q;
}
// After this rank's Destroy/Abort returned: count it, and wait (at most limit_s; 0: not at all)
// until every rank of the clique in this process is through its own. Returns false on timeout.
static bool sc_clique_done(const std::shared_ptr<ScVendorClique>& q, double limit_s) {
  if (!q) return true;
  std::unique_lock<std::mutex> lq(q->mu);
  ++q->done;
  q->cv.notify_all();
  if (limit_s <= 0) return true;
  return q->cv.wait_for(lq, std::chrono::duration<double>(limit_s), [&] { return q->done >= q->members; });
}

// Immediate: ncclCommAbort does not wait for the peers. wait_s > 0 (destroy path): then wait that
// long for the in-process sibling ranks, as after a Destroy (item 4 below); sc_comm_abort passes 0.
static int sc_vendor_abort_comm(vComm vc, int rank, double wait_s) {
  const std::shared_ptr<ScVendorClique> q = sc_clique_detach(vc);
  vResult r;
  {
    std::lock_guard<std::mutex> lk(g_vendor_teardown_mu);
    r = g_vendor.CommAbort(vc);
  }
  const bool all_done = sc_clique_done(q, wait_s);
  if (r != 0) return sc_fail(SC_ERR_VENDOR, "rank %d: ncclCommAbort: %s", rank, g_vendor.GetErrorString(r));
  if (!all_done)
    return sc_fail(SC_ERR_TIMEOUT, "rank %d: the other ranks of this process did not finish closing the vendor "
                   "communicator within %.1f s", rank, wait_s);
  return SC_OK;
}

// Finalize (unserialized), then Destroy (serialized). A failed Finalize leaves the communicator in an
// unknown state: it is aborted instead of destroyed. Runs on the worker thread, whose sc_last_error
// is not the caller's, so the text comes back through *err.
static int sc_vendor_finalize_destroy(vComm vc, int rank, int device, double limit, std::string* err) {
  char buf[768];
  // NCCL selects the communicator's device itself; a failure here is reported, but the collective
  // Finalize still runs so that the peers are not left waiting for this rank.
  const gpuError_t e = gpuSetDevice(device);
  if (e != gpuSuccess) (void)gpuGetLastError();
  const vResult rf = g_vendor.CommFinalize ? g_vendor.CommFinalize(vc) : 0;
  const std::shared_ptr<ScVendorClique> q = sc_clique_detach(vc);
  vResult rd = 0, ra = 0;
  {
    std::lock_guard<std::mutex> lk(g_vendor_teardown_mu);
    if (rf == 0) rd = g_vendor.CommDestroy(vc);
    else ra = g_vendor.CommAbort(vc);  // failed Finalize: state unknown, free it the peer-free way
  }
  // Item 4: return only once the other ranks of this process are through their Destroy/Abort too.
  const bool all_done = sc_clique_done(q, limit);
  if (rf != 0) {
    snprintf(buf, sizeof(buf), "rank %d: ncclCommFinalize: %s; then ncclCommAbort: %s", rank,
             g_vendor.GetErrorString(rf), ra ? g_vendor.GetErrorString(ra) : "ok");
    *err = buf;
    return SC_ERR_VENDOR;
  }
  if (rd != 0) {
    snprintf(buf, sizeof(buf), "rank %d: ncclCommDestroy: %s", rank, g_vendor.GetErrorString(rd));
    *err = buf;
    return SC_ERR_VENDOR;
  }
  if (!all_done) {
    snprintf(buf, sizeof(buf), "rank %d: the other ranks of this process did not finish closing the vendor "
             "communicator within %.1f s", rank, limit);
    *err = buf;
    return SC_ERR_TIMEOUT;
  }
  if (e != gpuSuccess) {
    snprintf(buf, sizeof(buf), "rank %d: set device %d for the vendor teardown: %s (the teardown itself succeeded)",
             rank, device, gpuGetErrorString(e));
    *err = buf;
    return SC_ERR_RUNTIME;
  }
  return SC_OK;
}

struct ScVendorClose {  // shared by sc_vendor_close_comm and its worker, which may outlive it
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = SC_OK;
  std::string err;
};

// Collective: every rank of the vendor communicator must call it (sc_comm_destroy does so only after
// its barrier). Waits at most timeout_s.
static int sc_vendor_close_comm(vComm vc, int rank, int device, double timeout_s) {
  auto st = std::make_shared<ScVendorClose>();
  const double limit = std::min(std::max(timeout_s, 1.0), 1e7);
  std::thread worker;
  try {
    worker = std::thread([st, vc, rank, device, limit] {
      std::string err;
      const int rc = sc_vendor_finalize_destroy(vc, rank, device, limit, &err);
      std::lock_guard<std::mutex> lk(st->mu);
      st->rc = rc;
      st->err = err;
      st->done = true;
      st->cv.notify_all();
    });
  } catch (const std::exception&) {  // no thread to be had: same steps inline, unbounded
    std::string err;
    const int rc = sc_vendor_finalize_destroy(vc, rank, device, limit, &err);
    return rc == SC_OK ? SC_OK : sc_fail(rc, "%s", err.c_str());
  }
  // The worker's own waits are bounded by `limit`; this one a little later, so that its text wins.
  std::unique_lock<std::mutex> lk(st->mu);
  if (!st->cv.wait_for(lk, std::chrono::duration<double>(limit * 1.05 + 1.0), [&] { return st->done; })) {
    lk.unlock();
    worker.detach();
    return sc_fail(SC_ERR_TIMEOUT,
                   "rank %d: %s did not return within %.1f s (a peer rank never closed its vendor "
                   "communicator?); it is left to a background thread",
                   rank, g_vendor.CommFinalize ? "ncclCommFinalize/ncclCommDestroy" : "ncclCommDestroy",
                   limit * 1.05 + 1.0);
  }
  const int rc = st->rc;
  const std::string err = st->err;
  lk.unlock();
  worker.join();
  return rc == SC_OK ? SC_OK : sc_fail(rc, "%s", err.c_str());
}


// float -> IEEE half, round to nearest even (host side, for the vendor PREMUL scalar).
static uint16_t sc_host_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                     // subnormal or zero
    if (absx < 0x33000000u) return (uint16_t)sign;
    const uint32_t e = absx >> 23, m = (absx & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;                             // 14 + (113 - e) - 1
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = absx - 0x38000000u;                              // rebias 127 -> 15
  r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  return (uint16_t)(sign | r);
}

static int sc_vendor_op(sc_comm* c, vComm vc, int dtype, int op, double factor, vOp* out, bool* created) {
  *created = false;
  switch (op) {
    case SC_SUM: *out = 0; return SC_OK;
    case SC_PRODUCT: *out = 1; return SC_OK;
    case SC_MAX: *out = 2; return SC_OK;
    case SC_MIN: *out = 3; return SC_OK;
    case SC_AVG: *out = 4; return SC_OK;
    case SC_PREMUL_SUM: {
      unsigned char scalar[8];
      if (dtype == SC_FLOAT32) { float v = (float)factor; memcpy(scalar, &v, 4); }
      else if (dtype == SC_FLOAT64) { memcpy(scalar, &factor, 8); }
      else if (dtype == SC_BFLOAT16) {
        float v = (float)factor; uint32_t u; memcpy(&u, &v, 4);
        u += 0x7fffu + ((u >> 16) & 1u); uint16_t h = (uint16_t)(u >> 16); memcpy(scalar, &h, 2);
      } else if (dtype == SC_FLOAT16) {
        uint16_t h = sc_host_f2h((float)factor); memcpy(scalar, &h, 2);
      } else return sc_fail(SC_ERR_UNSUPPORTED, "PREMUL_SUM on integers");
      vResult r = g_vendor.RedOpCreatePreMulSum(out, scalar, sc_vendor_dtype(dtype), 1 /*host immediate*/, vc);
      if (r != 0) return sc_fail(SC_ERR_VENDOR, "ncclRedOpCreatePreMulSum: %s", g_vendor.GetErrorString(r));
      *created = true;
      return SC_OK;
    }
  }
  return sc_fail(SC_ERR_INVALID_ARG, "unknown op %d", op);
}

// Whether a vendor call can run on `c` with vendor communicator `vc`: the library loaded, `c` not
// aborted, its vendor communicator made. Also what sc_plan answers for a forced VENDOR.
static int sc_vendor_check(sc_comm* c, vComm vc) {
  if (!sc_vendor_ready()) return SC_ERR_VENDOR;
  if (c->aborted) return sc_fail(SC_ERR_ABORTED, "communicator was aborted");
  if (!vc) return sc_fail(SC_ERR_STATE, "rank %d: vendor communicator not initialized (sc_vendor_comm_init)", c->rank);
  return SC_OK;
}

// One vendor call: counts itself in c->vusers, then takes the vendor communicator once. An abort
// from another thread (the Java peer watch, a user's abort) first takes the communicator away, then
// waits for the calls that still hold it before ncclCommAbort frees it: a call counted before the
// exchange may hold the old pointer and is waited for; one counted after it reads null and fails.
struct ScVendorUse {
  sc_comm* c;
  vComm vc = nullptr;
  int rc;
  explicit ScVendorUse(sc_comm* comm) : c(comm) {
    if (!c) { rc = sc_fail(SC_ERR_INVALID_ARG, "communicator is null"); return; }
    c->vusers.fetch_add(1);
    vc = __atomic_load_n(&c->vcomm, __ATOMIC_SEQ_CST);
    rc = sc_vendor_check(c, vc);
  }
  ~ScVendorUse() { if (c) c->vusers.fetch_sub(1); }
  ScVendorUse(const ScVendorUse&) = delete;
  ScVendorUse& operator=(const ScVendorUse&) = delete;
};

extern "C" int sc_vendor_comm_init(sc_comm_t c, const void* id) {
  if (!c || !id) return sc_fail(SC_ERR_INVALID_ARG, "null argument");
  if (!sc_vendor_ready()) return SC_ERR_VENDOR;
  if (c->vcomm) return sc_fail(SC_ERR_STATE, "vendor communicator already initialized");
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  vUniqueId uid;
  memcpy(&uid, id, sizeof(uid));
  // ncclCommInitRank blocks until every rank has joined, so each rank calls this from its own thread
  // (or process), as the callers do (one thread per rank); one thread initializing several ranks would
  // need ncclGroupStart/End around them (nccl.h), which this per-rank API does not offer.
  std::shared_ptr<ScVendorClique> q = sc_clique_join(uid);  // before: see "vendor communicator teardown"
  vResult r = g_vendor.CommInitRank(&c->vcomm, c->nranks, uid, c->rank);
  sc_clique_init_done(uid, q, c->vcomm, r == 0);
  if (r != 0) {
    c->vcomm = nullptr;
    return sc_fail(SC_ERR_VENDOR, "ncclCommInitRank(rank %d of %d): %s", c->rank, c->nranks, g_vendor.GetErrorString(r));
  }
  return SC_OK;
}

static int sc_vendor_allreduce(sc_comm* c, const void* s, void* r, size_t n, int dtype, int op, double f, gpuStream_t st) {
  ScVendorUse u(c);
  SC_TRY(u.rc);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  vOp vop;
  bool created;
  SC_TRY(sc_vendor_op(c, u.vc, dtype, op, f, &vop, &created));
  vResult res = g_vendor.AllReduce(s, r, n, sc_vendor_dtype(dtype), vop, u.vc, st);
  if (created) g_vendor.RedOpDestroy(vop, u.vc);
  if (res != 0) return sc_fail(SC_ERR_VENDOR, "ncclAllReduce: %s", g_vendor.GetErrorString(res));
  return SC_OK;
}

extern "C" int sc_vendor_allgather(sc_comm_t c, const void* s, void* r, size_t n, int dtype, void* st) {
  ScVendorUse u(c);
  SC_TRY(u.rc);
  if (!sc_dtype_size(dtype)) return sc_fail(SC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  vResult res = g_vendor.AllGather(s, r, n, sc_vendor_dtype(dtype), u.vc, (gpuStream_t)st);
  if (res != 0) return sc_fail(SC_ERR_VENDOR, "ncclAllGather: %s", g_vendor.GetErrorString(res));
  return SC_OK;
}
extern "C" int sc_vendor_reducescatter(sc_comm_t c, const void* s, void* r, size_t n, int dtype, int op, double f, void* st) {
  ScVendorUse u(c);
  SC_TRY(u.rc);
  SC_TRY(sc_check_reduce_args(c, s, r, dtype, op, "sc_vendor_reducescatter"));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  vOp vop;
  bool created;
  SC_TRY(sc_vendor_op(c, u.vc, dtype, op, f, &vop, &created));
  vResult res = g_vendor.ReduceScatter(s, r, n, sc_vendor_dtype(dtype), vop, u.vc, (gpuStream_t)st);
  if (created) g_vendor.RedOpDestroy(vop, u.vc);
  if (res != 0) return sc_fail(SC_ERR_VENDOR, "ncclReduceScatter: %s", g_vendor.GetErrorString(res));
  return SC_OK;
}
extern "C" int sc_vendor_broadcast(sc_comm_t c, const void* s, void* r, size_t n, int dtype, int root, void* st) {
  ScVendorUse u(c);
  SC_TRY(u.rc);
  if (!sc_dtype_size(dtype)) return sc_fail(SC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  vResult res = g_vendor.Broadcast(s, r, n, sc_vendor_dtype(dtype), root, u.vc, (gpuStream_t)st);
  if (res != 0) return sc_fail(SC_ERR_VENDOR, "ncclBroadcast: %s", g_vendor.GetErrorString(res));
  return SC_OK;
}

// The baseline for device-resident split sizes with the vendor library: exchange the counts with
// grouped send/recv, copy both count vectors to the host and wait for them (the host
// synchronization sc_alltoallv avoids), then grouped send/recv of the data (packed layout).
extern "C" int sc_vendor_alltoallv(sc_comm_t c, const void* send, const int64_t* send_counts, void* recv,
                                   size_t recv_capacity, int64_t* recv_counts, int dtype, void* stream) {
  ScVendorUse u(c);
  SC_TRY(u.rc);
  const size_t es = sc_dtype_size(dtype);
  if (!es) return sc_fail(SC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  if (!send_counts || !recv_counts) return sc_fail(SC_ERR_INVALID_ARG, "sc_vendor_alltoallv: null counts");
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const int n = c->nranks;
  gpuStream_t st = (gpuStream_t)stream;
  vResult res = g_vendor.GroupStart();
  for (int p = 0; p < n && res == 0; ++p) {
    res = g_vendor.Send(send_counts + p, 1, sc_vendor_dtype(SC_INT64), p, u.vc, st);
    if (res == 0) res = g_vendor.Recv(recv_counts + p, 1, sc_vendor_dtype(SC_INT64), p, u.vc, st);
  }
  vResult res2 = g_vendor.GroupEnd();
  if (res == 0) res = res2;
  if (res != 0) return sc_fail(SC_ERR_VENDOR, "nccl send/recv of the counts: %s", g_vendor.GetErrorString(res));
  int64_t hs[SC_MAX_RANKS], hr[SC_MAX_RANKS];
  gpuError_t e = gpuMemcpyAsync(hs, send_counts, n * sizeof(int64_t), gpuMemcpyDeviceToHost, st);
  if (e == gpuSuccess) e = gpuMemcpyAsync(hr, recv_counts, n * sizeof(int64_t), gpuMemcpyDeviceToHost, st);
  if (e == gpuSuccess) e = gpuStreamSynchronize(st);
  if (e != gpuSuccess) return sc_fail(SC_ERR_RUNTIME, "sc_vendor_alltoallv: counts to host: %s", gpuGetErrorString(e));
  if (c->aborted) return sc_fail(SC_ERR_ABORTED, "communicator was aborted");
  size_t so = 0, ro = 0, rtot = 0;
  for (int p = 0; p < n; ++p) {  // before any send/recv is queued (a partial group would hang peers)
    if (hs[p] < 0 || hr[p] < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_vendor_alltoallv: negative count");
    rtot += (size_t)hr[p];
  }
  if (rtot > recv_capacity)
    return sc_fail(SC_ERR_INVALID_ARG, "sc_vendor_alltoallv: %zu elements to receive, recv holds %zu", rtot, recv_capacity);
  res = g_vendor.GroupStart();
  for (int p = 0; p < n && res == 0; ++p) {
    if (hs[p]) res = g_vendor.Send((const char*)send + so * es, (size_t)hs[p], sc_vendor_dtype(dtype), p, u.vc, st);
    if (res == 0 && hr[p]) res = g_vendor.Recv((char*)recv + ro * es, (size_t)hr[p], sc_vendor_dtype(dtype), p, u.vc, st);
    so += (size_t)hs[p];
    ro += (size_t)hr[p];
  }
  res2 = g_vendor.GroupEnd();
  if (res == 0) res = res2;
  if (res != 0) return sc_fail(SC_ERR_VENDOR, "nccl send/recv of the data: %s", g_vendor.GetErrorString(res));
  return SC_OK;
}
