// Vendor groups: a vendor communicator (NCCL / RCCL) of its own over any ranks, with no DDA part,
// e.g. the rail of one local rank across nodes. Non-blocking (ncclConfig_t.blocking = 0), so that
// creation, every enqueue and the teardown are bounded by the group's timeout and an abort from
// another thread ends kernels stuck on a peer that is gone. Also the element-wise steps of collectives
// composed from others: the division that ends an AVG composed from SUMs, and float conversions.
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/comm.h"

#include <chrono>
#include <climits>
#include <thread>

// The prefix of ncclConfig_t every NCCL since 2.17 and RCCL read: NCCL copies `size` bytes and
// keeps its defaults for the fields after them (parseCommConfig in NCCL's src/init.cc).
struct ScVendorConfig {
  size_t size;
  unsigned int magic;    // NCCL_API_MAGIC
  unsigned int version;  // NCCL_VERSION(2, 17, 0): the fields below are read, later ones defaulted
  int blocking;
  int cgaClusterSize, minCTAs, maxCTAs;
  const char* netName;
};
static const int kVendorInProgress = 7;  // ncclInProgress

struct sc_vgroup {
  sc_vgroup() { ++g_live_comms; }
  ~sc_vgroup() { --g_live_comms; }
  sc_vgroup(const sc_vgroup&) = delete;
  sc_vgroup& operator=(const sc_vgroup&) = delete;
  int rank = 0, nranks = 0, device = 0;
  double timeout_s = 300.0;
  vComm vc = nullptr;          // null once aborted; read through ScGroupUse
  std::atomic<int> users{0};  // calls holding vc (ScGroupUse); sc_vgroup_abort waits for them
  std::atomic<bool> aborted{false};
  std::shared_ptr<ScVendorClique> clique;
};

// Polls the group's asynchronous state until it leaves ncclInProgress, at most timeout_s.
static int sc_vgroup_settle(vComm vc, int rank, double timeout_s, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  int polls = 0;
  for (;;) {
    vResult st = 0;
    const vResult r = g_vendor.CommGetAsyncError(vc, &st);
    if (r != 0) return sc_fail(SC_ERR_VENDOR, "rank %d: %s: ncclCommGetAsyncError: %s", rank, what, g_vendor.GetErrorString(r));
    if (st == 0) return SC_OK;
    if (st != kVendorInProgress) return sc_fail(SC_ERR_VENDOR, "rank %d: %s: %s", rank, what, g_vendor.GetErrorString(st));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > timeout_s)
      return sc_fail(SC_ERR_TIMEOUT, "rank %d: %s did not complete within %.1f s (a peer did not join?)", rank, what, timeout_s);
    // spin briefly (an enqueue usually settles at once), then sleep: creation waits on peers
    if (++polls > 64) std::this_thread::sleep_for(std::chrono::microseconds(polls > 4096 ? 1000 : 50));
  }
}

// The result of one vendor call on a non-blocking group: in progress -> settle, else its status.
static int sc_vgroup_result(vComm vc, int rank, double timeout_s, vResult r, const char* what) {
  if (r == kVendorInProgress) return sc_vgroup_settle(vc, rank, timeout_s, what);
  if (r != 0) return sc_fail(SC_ERR_VENDOR, "rank %d: %s: %s", rank, what, g_vendor.GetErrorString(r));
  return SC_OK;
}

// One call on a group: counted in g->users, then takes the vendor communicator once (the
// ScVendorUse argument: an abort first takes vc away, then waits for the calls that hold it).
struct ScGroupUse {
  sc_vgroup* g;
  vComm vc = nullptr;
  int rc = SC_OK;
  explicit ScGroupUse(sc_vgroup* group) : g(group) {
    if (!g) { rc = sc_fail(SC_ERR_INVALID_ARG, "vendor group is null"); return; }
    g->users.fetch_add(1);
    vc = __atomic_load_n(&g->vc, __ATOMIC_SEQ_CST);
    if (!vc || g->aborted.load()) rc = sc_fail(SC_ERR_ABORTED, "rank %d: vendor group was aborted", g->rank);
  }
  ~ScGroupUse() { if (g) g->users.fetch_sub(1); }
  ScGroupUse(const ScGroupUse&) = delete;
  ScGroupUse& operator=(const ScGroupUse&) = delete;
};

static bool sc_vgroup_supported() {
  if (!sc_vendor_ready()) return false;
  if (!g_vendor.CommInitRankConfig || !g_vendor.CommGetAsyncError) {
    sc_fail(SC_ERR_VENDOR, "vendor library %s has no ncclCommInitRankConfig / ncclCommGetAsyncError "
            "(vendor groups need NCCL >= 2.14 or RCCL)", g_vendor.name);
    return false;
  }
  return true;
}

extern "C" int sc_vgroup_create(int rank, int nranks, int device, const void* id, int id_len, double timeout_s,
                                sc_vgroup_t* out) {
  if (!out || !id) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_create: null argument");
  *out = nullptr;
  if (nranks < 1 || nranks > 1 << 20 || rank < 0 || rank >= nranks)
    return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_create: rank %d of %d", rank, nranks);
  if (id_len != (int)sizeof(vUniqueId))
    return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_create: unique id of %d bytes, expected %d", id_len, (int)sizeof(vUniqueId));
  if (!(timeout_s > 0 && timeout_s <= 1e7)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_create: timeout %g s", timeout_s);
  if (!sc_vgroup_supported()) return SC_ERR_VENDOR;
  ScDeviceGuard dg(device);
  if (dg.rc) return dg.rc;
  vUniqueId uid;
  memcpy(&uid, id, sizeof(uid));
  ScVendorConfig cfg{sizeof(ScVendorConfig), 0xcafebeefu, 21700u, 0, INT_MIN, INT_MIN, INT_MIN, nullptr};
  std::shared_ptr<ScVendorClique> q = sc_clique_join(uid);  // see "vendor communicator teardown"
  vComm vc = nullptr;
  vResult r = g_vendor.CommInitRankConfig(&vc, nranks, uid, rank, &cfg);
  int rc = SC_OK;
  if (vc == nullptr) {
    rc = sc_fail(SC_ERR_VENDOR, "ncclCommInitRankConfig(rank %d of %d): %s", rank, nranks, g_vendor.GetErrorString(r));
  } else {
    rc = sc_vgroup_result(vc, rank, timeout_s, r, "ncclCommInitRankConfig");
  }
  sc_clique_init_done(uid, q, vc, rc == SC_OK);
  if (rc != SC_OK) {
    if (vc) {
      const std::string why = sc_error_text();
      std::lock_guard<std::mutex> lk(g_vendor_teardown_mu);
      g_vendor.CommAbort(vc);  // never waits for the peers
      sc_set_error_text(why.c_str());
    }
    return rc;
  }
  sc_vgroup* g = new sc_vgroup();
  g->rank = rank;
  g->nranks = nranks;
  g->device = device;
  g->timeout_s = timeout_s;
  g->vc = vc;
  *out = g;
  return SC_OK;
}

extern "C" int sc_vgroup_check(sc_vgroup_t g) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  vResult st = 0;
  const vResult r = g_vendor.CommGetAsyncError(u.vc, &st);
  if (r != 0) return sc_fail(SC_ERR_VENDOR, "rank %d: ncclCommGetAsyncError: %s", g->rank, g_vendor.GetErrorString(r));
  if (st != 0 && st != kVendorInProgress)
    return sc_fail(SC_ERR_VENDOR, "rank %d: vendor group failed: %s", g->rank, g_vendor.GetErrorString(st));
  return SC_OK;
}

extern "C" int sc_vgroup_abort(sc_vgroup_t g) {
  if (!g) return sc_fail(SC_ERR_INVALID_ARG, "vendor group is null");
  g->aborted.store(true);
  vComm vc = __atomic_exchange_n(&g->vc, (vComm) nullptr, __ATOMIC_SEQ_CST);
  if (!vc) return SC_OK;
  // Calls that took vc before the exchange are host-side enqueues (bounded by the timeout).
  while (g->users.load() > 0) std::this_thread::yield();
  return sc_vendor_abort_comm(vc, g->rank, 0);  // ends this rank's kernels of the group; immediate
}

extern "C" int sc_vgroup_destroy(sc_vgroup_t g) {
  if (!g) return SC_OK;
  int rc = SC_OK;
  vComm vc = __atomic_exchange_n(&g->vc, (vComm) nullptr, __ATOMIC_SEQ_CST);
  if (vc) {
    while (g->users.load() > 0) std::this_thread::yield();
    ScDeviceGuard dg(g->device);
    // Finalize waits for the peers' finalize (bounded); a failure leaves the state unknown: abort.
    vResult rf = g_vendor.CommFinalize ? g_vendor.CommFinalize(vc) : 0;
    rc = sc_vgroup_result(vc, g->rank, g->timeout_s, rf, "ncclCommFinalize");
    const std::string why = rc == SC_OK ? std::string() : std::string(sc_error_text());
    const std::shared_ptr<ScVendorClique> q = sc_clique_detach(vc);
    vResult rd;
    {
      std::lock_guard<std::mutex> lk(g_vendor_teardown_mu);
      rd = rc == SC_OK ? g_vendor.CommDestroy(vc) : g_vendor.CommAbort(vc);
    }
    sc_clique_done(q, g->timeout_s);
    if (rc != SC_OK) sc_set_error_text(why.c_str());
    else if (rd != 0) rc = sc_fail(SC_ERR_VENDOR, "rank %d: ncclCommDestroy: %s", g->rank, g_vendor.GetErrorString(rd));
  }
  delete g;
  return rc;
}

static int sc_vgroup_dtype(int dtype, const char* what) {
  const int vd = sc_vendor_dtype(dtype);
  if (vd < 0) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown dtype %d", what, dtype);
  return SC_OK;
}

extern "C" int sc_vgroup_allreduce(sc_vgroup_t g, const void* send, void* recv, size_t count, int dtype, int op,
                                   double premul_factor, void* stream) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  SC_TRY(sc_vgroup_dtype(dtype, "sc_vgroup_allreduce"));
  if (count && (!send || !recv)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_allreduce: null buffer");
  ScDeviceGuard dg(g->device);
  if (dg.rc) return dg.rc;
  vOp vop;
  bool created;
  SC_TRY(sc_vendor_op(nullptr, u.vc, dtype, op, premul_factor, &vop, &created));
  const vResult r = g_vendor.AllReduce(send, recv, count, sc_vendor_dtype(dtype), vop, u.vc, (gpuStream_t)stream);
  int rc = sc_vgroup_result(u.vc, g->rank, g->timeout_s, r, "ncclAllReduce");
  if (created) g_vendor.RedOpDestroy(vop, u.vc);
  return rc;
}

extern "C" int sc_vgroup_allgather(sc_vgroup_t g, const void* send, void* recv, size_t count_per_rank, int dtype,
                                   void* stream) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  SC_TRY(sc_vgroup_dtype(dtype, "sc_vgroup_allgather"));
  if (count_per_rank && (!send || !recv)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_allgather: null buffer");
  ScDeviceGuard dg(g->device);
  if (dg.rc) return dg.rc;
  const vResult r = g_vendor.AllGather(send, recv, count_per_rank, sc_vendor_dtype(dtype), u.vc, (gpuStream_t)stream);
  return sc_vgroup_result(u.vc, g->rank, g->timeout_s, r, "ncclAllGather");
}

extern "C" int sc_vgroup_reducescatter(sc_vgroup_t g, const void* send, void* recv, size_t recv_count, int dtype,
                                       int op, double premul_factor, void* stream) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  SC_TRY(sc_vgroup_dtype(dtype, "sc_vgroup_reducescatter"));
  if (recv_count && (!send || !recv)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_reducescatter: null buffer");
  ScDeviceGuard dg(g->device);
  if (dg.rc) return dg.rc;
  vOp vop;
  bool created;
  SC_TRY(sc_vendor_op(nullptr, u.vc, dtype, op, premul_factor, &vop, &created));
  const vResult r = g_vendor.ReduceScatter(send, recv, recv_count, sc_vendor_dtype(dtype), vop, u.vc, (gpuStream_t)stream);
  int rc = sc_vgroup_result(u.vc, g->rank, g->timeout_s, r, "ncclReduceScatter");
  if (created) g_vendor.RedOpDestroy(vop, u.vc);
  return rc;
}

extern "C" int sc_vgroup_broadcast(sc_vgroup_t g, const void* send, void* recv, size_t count, int dtype, int root,
                                   void* stream) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  SC_TRY(sc_vgroup_dtype(dtype, "sc_vgroup_broadcast"));
  if (root < 0 || root >= g->nranks) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_broadcast: root %d of %d", root, g->nranks);
  if (count && (!recv || (g->rank == root && !send))) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_broadcast: null buffer");
  ScDeviceGuard dg(g->device);
  if (dg.rc) return dg.rc;
  const vResult r = g_vendor.Broadcast(send, recv, count, sc_vendor_dtype(dtype), root, u.vc, (gpuStream_t)stream);
  return sc_vgroup_result(u.vc, g->rank, g->timeout_s, r, "ncclBroadcast");
}

extern "C" int sc_vgroup_alltoall(sc_vgroup_t g, const void* send, void* recv, size_t count_per_peer, int dtype,
                                  void* stream) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  SC_TRY(sc_vgroup_dtype(dtype, "sc_vgroup_alltoall"));
  if (count_per_peer && (!send || !recv)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_alltoall: null buffer");
  ScDeviceGuard dg(g->device);
  if (dg.rc) return dg.rc;
  const size_t bytes = count_per_peer * sc_dtype_size(dtype);
  const int vd = sc_vendor_dtype(dtype);
  gpuStream_t st = (gpuStream_t)stream;
  vResult r = g_vendor.GroupStart();
  for (int p = 0; p < g->nranks && r == 0 && count_per_peer; ++p) {
    r = g_vendor.Send((const char*)send + p * bytes, count_per_peer, vd, p, u.vc, st);
    if (r == 0) r = g_vendor.Recv((char*)recv + p * bytes, count_per_peer, vd, p, u.vc, st);
  }
  const vResult r2 = g_vendor.GroupEnd();
  if (r == 0) r = r2;
  return sc_vgroup_result(u.vc, g->rank, g->timeout_s, r, "ncclSend/ncclRecv (allToAll)");
}

extern "C" int sc_vgroup_batch(sc_vgroup_t g, int ops, const int* kinds, const int* peers, const long long* addresses,
                               const long long* bytes, void* stream) {
  ScGroupUse u(g);
  SC_TRY(u.rc);
  if (ops < 0 || ops > (1 << 20)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_batch: %d operations", ops);
  if (ops > 0 && (!kinds || !peers || !addresses || !bytes)) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_batch: null array");
  for (int i = 0; i < ops; ++i) {  // every operation checked before any is queued (a partial group would hang peers)
    if (kinds[i] != 0 && kinds[i] != 1) return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_batch: operation %d: kind %d", i, kinds[i]);
    if (peers[i] < 0 || peers[i] >= g->nranks)
      return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_batch: operation %d: peer %d of %d", i, peers[i], g->nranks);
    if (bytes[i] < 0 || (bytes[i] > 0 && addresses[i] == 0))
      return sc_fail(SC_ERR_INVALID_ARG, "sc_vgroup_batch: operation %d: %lld bytes at %llx", i, bytes[i], (unsigned long long)addresses[i]);
  }
  ScDeviceGuard dg(g->device);
  if (dg.rc) return dg.rc;
  gpuStream_t st = (gpuStream_t)stream;
  const int int8 = 0;  // ncclInt8: bytes
  vResult r = g_vendor.GroupStart();
  for (int i = 0; i < ops && r == 0; ++i) {
    if (bytes[i] == 0) continue;
    void* a = (void*)(uintptr_t)addresses[i];
    r = kinds[i] == 0 ? g_vendor.Send(a, (size_t)bytes[i], int8, peers[i], u.vc, st)
                      : g_vendor.Recv(a, (size_t)bytes[i], int8, peers[i], u.vc, st);
  }
  const vResult r2 = g_vendor.GroupEnd();
  if (r == 0) r = r2;
  return sc_vgroup_result(u.vc, g->rank, g->timeout_s, r, "ncclSend/ncclRecv (batch)");
}

// ---- element-wise division: the last step of an AVG composed from SUMs ----
template <int DT>
__global__ void sc_k_divide(typename ScType<DT>::T* x, size_t n, long long divisor) {
  typedef ScType<DT> S;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    x[i] = S::from(S::to(x[i]) / (typename S::Acc)divisor);
}

extern "C" int sc_divide(void* data, size_t count, int dtype, long long divisor, void* stream) {
  if (divisor < 1) return sc_fail(SC_ERR_INVALID_ARG, "sc_divide: divisor %lld", divisor);
  if (!sc_dtype_size(dtype)) return sc_fail(SC_ERR_INVALID_ARG, "sc_divide: unknown dtype %d", dtype);
  if (count == 0 || divisor == 1) return SC_OK;
  if (!data) return sc_fail(SC_ERR_INVALID_ARG, "sc_divide: null data");
  size_t blocks = (count + 255) / 256;
  const int grid = (int)(blocks > 4096 ? 4096 : blocks);
  gpuStream_t st = (gpuStream_t)stream;
  switch (dtype) {
    case SC_FLOAT32: sc_k_divide<SC_DT_F32><<<grid, 256, 0, st>>>((float*)data, count, divisor); break;
    case SC_BFLOAT16: sc_k_divide<SC_DT_BF16><<<grid, 256, 0, st>>>((uint16_t*)data, count, divisor); break;
    case SC_FLOAT16: sc_k_divide<SC_DT_F16><<<grid, 256, 0, st>>>((uint16_t*)data, count, divisor); break;
    case SC_FLOAT64: sc_k_divide<SC_DT_F64><<<grid, 256, 0, st>>>((double*)data, count, divisor); break;
    case SC_INT32: sc_k_divide<SC_DT_I32><<<grid, 256, 0, st>>>((int32_t*)data, count, divisor); break;
    case SC_INT64: sc_k_divide<SC_DT_I64><<<grid, 256, 0, st>>>((int64_t*)data, count, divisor); break;
  }
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

// ---- element-wise sum: a cross-node leg that reduces what it gathered, in a fixed order ----
template <int DT>
__global__ void sc_k_add(const typename ScType<DT>::T* x, typename ScType<DT>::T* y, size_t n) {
  typedef ScType<DT> S;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = S::from(S::to(y[i]) + S::to(x[i]));
}

extern "C" int sc_add(const void* x, void* y, size_t count, int dtype, void* stream) {
  if (!sc_dtype_size(dtype)) return sc_fail(SC_ERR_INVALID_ARG, "sc_add: unknown dtype %d", dtype);
  if (count == 0) return SC_OK;
  if (!x || !y) return sc_fail(SC_ERR_INVALID_ARG, "sc_add: null buffer");
  size_t blocks = (count + 255) / 256;
  const int grid = (int)(blocks > 4096 ? 4096 : blocks);
  gpuStream_t st = (gpuStream_t)stream;
  switch (dtype) {
    case SC_FLOAT32: sc_k_add<SC_DT_F32><<<grid, 256, 0, st>>>((const float*)x, (float*)y, count); break;
    case SC_BFLOAT16: sc_k_add<SC_DT_BF16><<<grid, 256, 0, st>>>((const uint16_t*)x, (uint16_t*)y, count); break;
    case SC_FLOAT16: sc_k_add<SC_DT_F16><<<grid, 256, 0, st>>>((const uint16_t*)x, (uint16_t*)y, count); break;
    case SC_FLOAT64: sc_k_add<SC_DT_F64><<<grid, 256, 0, st>>>((const double*)x, (double*)y, count); break;
    case SC_INT32: sc_k_add<SC_DT_I32><<<grid, 256, 0, st>>>((const int32_t*)x, (int32_t*)y, count); break;
    case SC_INT64: sc_k_add<SC_DT_I64><<<grid, 256, 0, st>>>((const int64_t*)x, (int64_t*)y, count); break;
  }
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

// ---- float conversions: bf16 / fp16 reduced in fp32 across legs, rounded once ----
template <int SDT, int DDT>
__global__ void sc_k_convert(const typename ScType<SDT>::T* x, typename ScType<DDT>::T* y, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = ScType<DDT>::from(ScType<SDT>::to(x[i]));
}

template <int SDT>
static void sc_convert_to(const void* src, void* dst, int dst_dtype, size_t n, int grid, gpuStream_t st) {
  typedef const typename ScType<SDT>::T* In;
  switch (dst_dtype) {
    case SC_FLOAT32: sc_k_convert<SDT, SC_DT_F32><<<grid, 256, 0, st>>>((In)src, (float*)dst, n); break;
    case SC_BFLOAT16: sc_k_convert<SDT, SC_DT_BF16><<<grid, 256, 0, st>>>((In)src, (uint16_t*)dst, n); break;
    case SC_FLOAT16: sc_k_convert<SDT, SC_DT_F16><<<grid, 256, 0, st>>>((In)src, (uint16_t*)dst, n); break;
  }
}

extern "C" int sc_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t count, void* stream) {
  auto is_float = [](int d) { return d == SC_FLOAT32 || d == SC_BFLOAT16 || d == SC_FLOAT16; };
  if (!is_float(src_dtype) || !is_float(dst_dtype))
    return sc_fail(SC_ERR_INVALID_ARG, "sc_convert: dtypes %d -> %d (float32, bfloat16 and float16 only)", src_dtype, dst_dtype);
  if (count == 0) return SC_OK;
  if (!src || !dst) return sc_fail(SC_ERR_INVALID_ARG, "sc_convert: null buffer");
  const char *s0 = (const char*)src, *d0 = (const char*)dst;
  const size_t sb = count * sc_dtype_size(src_dtype), db = count * sc_dtype_size(dst_dtype);
  if (s0 < d0 + db && d0 < s0 + sb) return sc_fail(SC_ERR_INVALID_ARG, "sc_convert: source and destination overlap");
  size_t blocks = (count + 255) / 256;
  const int grid = (int)(blocks > 4096 ? 4096 : blocks);
  gpuStream_t st = (gpuStream_t)stream;
  switch (src_dtype) {
    case SC_FLOAT32: sc_convert_to<SC_DT_F32>(src, dst, dst_dtype, count, grid, st); break;
    case SC_BFLOAT16: sc_convert_to<SC_DT_BF16>(src, dst, dst_dtype, count, grid, st); break;
    case SC_FLOAT16: sc_convert_to<SC_DT_F16>(src, dst, dst_dtype, count, grid, st); break;
  }
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}
