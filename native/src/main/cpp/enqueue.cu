// Enqueueing collectives: argument checks, the one protocol policy (sc_plan), and typed dispatch
// of the DDA kernels in chunks of the staging half.
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/launch.h"

#include <atomic>

// ---- typed dispatch ----
template <int DT, int OP>
static void sc_launch_allreduce_t(sc_comm* c, int proto, const void* s, void* r, size_t n, double f, gpuStream_t st) {
  typedef ScType<DT> Ty;
  typedef typename Ty::T T;
  typedef typename Ty::Acc Acc;
  const size_t units = (n + Ty::V - 1) / Ty::V;
  // The one-shots' two-rank build (NR = 2, dda_allreduce.cuh) at two ranks, the generic one otherwise.
#define SC_ONESHOT(kernel) (c->nranks == 2 ? kernel<DT, OP, 2> : kernel<DT, OP, 0>)
  if (proto == SC_PROTO_LAMPORT) {
    if constexpr (ScLamportOk<DT>::value)
      sc_launch(c, SC_ONESHOT(sc_k_allreduce_lamport), sc_blocks_for(c, units, (int)c->p.lamport_threads), (int)c->p.lamport_threads,
                st, c->dev, c->seq, (const T*)s, (T*)r, n, (Acc)f);
    else
      c->launch_err = gpuErrorInvalidValue;  // the host's type check and ScLamportOk disagree: fail, never skip
  } else if (proto == SC_PROTO_LL) {
    sc_launch(c, SC_ONESHOT(sc_k_allreduce_ll), sc_blocks_for(c, units, (int)c->p.ll_threads), (int)c->p.ll_threads,
              st, c->dev, c->seq, (const T*)s, (T*)r, n, (Acc)f);
  } else if (proto == SC_PROTO_FLAT) {
    sc_launch(c, SC_ONESHOT(sc_k_allreduce_flat), sc_blocks_for(c, units), (int)c->p.threads,
              st, c->dev, c->seq, (const T*)s, (T*)r, n, (Acc)f);
  } else {
    const size_t su = (units + c->nranks - 1) / c->nranks;
    sc_launch(c, sc_k_allreduce_tree<DT, OP>, sc_blocks_for(c, su), (int)c->p.threads, st, c->dev, c->seq, (const T*)s, (T*)r, n, (Acc)f);
  }
#undef SC_ONESHOT
}
template <int DT, int OP>
static void sc_launch_rs_t(sc_comm* c, const void* s, void* r, size_t n, size_t stride, double f, gpuStream_t st) {
  typedef ScType<DT> Ty;
  typedef typename Ty::T T;
  typedef typename Ty::Acc Acc;
  const size_t units = (n + Ty::V - 1) / Ty::V;
  sc_launch(c, sc_k_reducescatter<DT, OP>, sc_blocks_for(c, units), (int)c->p.threads, st, c->dev, c->seq, (const T*)s, (T*)r, n, stride, (Acc)f);
}

#define SC_FLOAT_OPS(DT, CALL)                   \
  switch (op) {                                  \
    case SC_SUM: CALL(DT, SC_OP_SUM); break;     \
    case SC_AVG: CALL(DT, SC_OP_AVG); break;     \
    case SC_MIN: CALL(DT, SC_OP_MIN); break;     \
    case SC_MAX: CALL(DT, SC_OP_MAX); break;     \
    case SC_PRODUCT: CALL(DT, SC_OP_PROD); break; \
    case SC_PREMUL_SUM: CALL(DT, SC_OP_PREMUL); break; \
  }
#define SC_INT_OPS(DT, CALL)                     \
  switch (op) {                                  \
    case SC_SUM: CALL(DT, SC_OP_SUM); break;     \
    case SC_AVG: CALL(DT, SC_OP_AVG); break;     \
    case SC_MIN: CALL(DT, SC_OP_MIN); break;     \
    case SC_MAX: CALL(DT, SC_OP_MAX); break;     \
    case SC_PRODUCT: CALL(DT, SC_OP_PROD); break; \
  }
#define SC_ALL_TYPES(CALL)                                   \
  switch (dtype) {                                           \
    case SC_FLOAT32: SC_FLOAT_OPS(SC_DT_F32, CALL) break;    \
    case SC_BFLOAT16: SC_FLOAT_OPS(SC_DT_BF16, CALL) break;  \
    case SC_FLOAT16: SC_FLOAT_OPS(SC_DT_F16, CALL) break;    \
    case SC_FLOAT64: SC_FLOAT_OPS(SC_DT_F64, CALL) break;    \
    case SC_INT32: SC_INT_OPS(SC_DT_I32, CALL) break;        \
    case SC_INT64: SC_INT_OPS(SC_DT_I64, CALL) break;        \
  }

static int sc_check_reduce_args(sc_comm* c, const void* send, void* recv, int dtype, int op, const char* what) {
  const size_t es = sc_dtype_size(dtype);
  if (!es) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown dtype %d", what, dtype);
  if (op < SC_SUM || op > SC_PREMUL_SUM) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown op %d", what, op);
  if (sc_is_int(dtype) && op == SC_PREMUL_SUM)
    return sc_fail(SC_ERR_UNSUPPORTED, "%s: PREMUL_SUM is defined for floating-point types only", what);
  if (!send || !recv) return sc_fail(SC_ERR_INVALID_ARG, "%s: null buffer", what);
  if (((uintptr_t)send % es) || ((uintptr_t)recv % es))
    return sc_fail(SC_ERR_INVALID_ARG, "%s: buffers must be aligned to the element size (%zu)", what, es);
  (void)c;
  return SC_OK;
}


static bool sc_lp_eligible(int dtype, int op) {
  return (dtype == SC_FLOAT32 || dtype == SC_BFLOAT16) && (op == SC_SUM || op == SC_AVG);
}

// ---- the one policy: which protocol a call runs (sc_plan reports it, the entry points run it) ----
// Every input is an argument, a setting the ranks agree on (the AGREE entries of params.def), or
// whether a vendor communicator exists (the Java layer builds one on every rank or on none), so
// every rank of a call decides the same.
static int sc_allreduce_protocol(sc_comm* c, size_t count, int dtype, int op, int algo, int* proto) {
  if (algo < SC_ALGO_AUTO || algo > SC_ALGO_VENDOR) return sc_fail(SC_ERR_INVALID_ARG, "unknown algo %d", algo);
  const size_t es = sc_dtype_size(dtype);
  if (!es) return sc_fail(SC_ERR_INVALID_ARG, "unknown dtype %d", dtype);
  const int n = c->nranks;
  if (algo == SC_ALGO_LP) {
    if (!sc_lp_eligible(dtype, op))
      return sc_fail(SC_ERR_UNSUPPORTED, "allreduce(LP): low precision takes fp32 or bf16 data with SUM or AVG");
    *proto = SC_PROTO_LP;
    return SC_OK;
  }
  if (algo == SC_ALGO_AUTO && c->p.lp_allreduce && sc_lp_eligible(dtype, op) && count * es >= (size_t)c->p.lp_min_bytes && n > 1) {
    *proto = SC_PROTO_LP;
    return SC_OK;
  }
  if (algo == SC_ALGO_AUTO) {
    const size_t bytes = count * es;
    algo = n == 1 || bytes <= (size_t)c->p.flat_max_bytes ? SC_ALGO_FLAT
           : bytes <= (size_t)c->p.tree_max_bytes || !c->vcomm ? SC_ALGO_TREE
                                                                 : SC_ALGO_VENDOR;
  }
  if (algo == SC_ALGO_VENDOR) {
    SC_TRY(sc_vendor_check(c, c->vcomm));
    *proto = SC_PROTO_VENDOR;
    return SC_OK;
  }
  if (algo == SC_ALGO_TREE) {
    *proto = SC_PROTO_TREE;
    return SC_OK;
  }
  // One-shot: the Lamport or LL protocol when the whole call fits one chunk of theirs, else the
  // barrier one-shot in chunks of the staging half.
  const size_t units_all = (count + 16 / es - 1) / (16 / es);
  const bool lamport_type = dtype == SC_FLOAT32 || dtype == SC_BFLOAT16 || dtype == SC_FLOAT16;
  if (count <= (size_t)c->p.lamport_max_bytes / es && lamport_type && units_all * 16 * (size_t)n <= SC_LAMPORT_HALF)
    *proto = SC_PROTO_LAMPORT;
  else if (count * es <= (size_t)c->p.ll_max_bytes && sc_ll_slot_bytes(units_all) * (size_t)n <= c->half)
    *proto = SC_PROTO_LL;
  else
    *proto = SC_PROTO_FLAT;
  return SC_OK;
}

// allGather, reduceScatter, allToAll (whole-call bytes `bytes`) and broadcast: one direct protocol,
// LP when asked for or switched on (`lp_on`) from lp_min_bytes, or the vendor library.
static int sc_exchange_protocol(sc_comm* c, const char* what, size_t bytes, int dtype, int op, bool lp_on, bool has_lp,
                                bool has_vendor, int algo, int* proto) {
  if (algo < SC_ALGO_AUTO || algo > SC_ALGO_VENDOR) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown algo %d", what, algo);
  if (!sc_dtype_size(dtype)) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown dtype %d", what, dtype);
  if (algo == SC_ALGO_LP) {
    if (!has_lp || !sc_lp_eligible(dtype, op))
      return sc_fail(SC_ERR_UNSUPPORTED, "%s(LP): low precision takes fp32 or bf16 data (reductions: SUM or AVG)", what);
    *proto = SC_PROTO_LP;
  } else if (algo == SC_ALGO_VENDOR) {
    if (!has_vendor) return sc_fail(SC_ERR_UNSUPPORTED, "%s: the vendor library has no %s here", what, what);
    SC_TRY(sc_vendor_check(c, c->vcomm));
    *proto = SC_PROTO_VENDOR;
  } else if (algo == SC_ALGO_AUTO && has_lp && lp_on && sc_lp_eligible(dtype, op) && bytes >= (size_t)c->p.lp_min_bytes && c->nranks > 1) {
    *proto = SC_PROTO_LP;
  } else {
    *proto = SC_PROTO_FLAT;
  }
  return SC_OK;
}

extern "C" int sc_plan(sc_comm_t c, int collective, size_t count, int dtype, int op, int algo, int* protocol) {
  if (!c || !protocol) return sc_fail(SC_ERR_INVALID_ARG, "sc_plan: null argument");
  const size_t wire = count * sc_dtype_size(dtype) * (size_t)c->nranks;
  switch (collective) {
    case SC_COLL_ALLREDUCE: return sc_allreduce_protocol(c, count, dtype, op, algo, protocol);
    case SC_COLL_ALLGATHER:
      return sc_exchange_protocol(c, "allgather", wire, dtype, SC_SUM, c->p.lp_allgather, true, true, algo, protocol);
    case SC_COLL_REDUCESCATTER:
      return sc_exchange_protocol(c, "reducescatter", wire, dtype, op, c->p.lp_reducescatter, true, true, algo, protocol);
    case SC_COLL_ALLTOALL:
      return sc_exchange_protocol(c, "alltoall", wire, dtype, SC_SUM, c->p.lp_alltoall, true, false, algo, protocol);
    case SC_COLL_BROADCAST: return sc_exchange_protocol(c, "broadcast", 0, dtype, SC_SUM, false, false, true, algo, protocol);
    case SC_COLL_ALLTOALLV:
    case SC_COLL_BARRIER:
      if (algo != SC_ALGO_AUTO && algo != SC_ALGO_FLAT) return sc_fail(SC_ERR_UNSUPPORTED, "sc_plan: collective %d has one protocol (flat)", collective);
      *protocol = SC_PROTO_FLAT;
      return SC_OK;
    default: return sc_fail(SC_ERR_INVALID_ARG, "sc_plan: unknown collective %d", collective);
  }
}

extern "C" const char* sc_protocol_name(int p) {
  switch (p) {
    case SC_PROTO_LAMPORT: return "lamport";
    case SC_PROTO_LL: return "ll";
    case SC_PROTO_FLAT: return "flat";
    case SC_PROTO_TREE: return "tree";
    case SC_PROTO_LP: return "lp";
    case SC_PROTO_VENDOR: return "vendor";
    default: return "unknown";
  }
}

// A rank that refuses its own arguments still meets its peers: it runs a barrier kernel whose call
// header says "refused", so that their kernels fail at once (SC_ERR_MISMATCH, naming this rank)
// instead of waiting out the timeout for a rank that never comes. The communicator is unusable
// afterwards on every rank, as after any mismatch. Returns rc, with this rank's own error text.
static int sc_refuse(sc_comm* c, int coll, void* stream, int rc) {
  if (!c || !c->connected || c->nranks < 2 || c->aborted || ((volatile int*)c->host_words)[0] != SC_DEVERR_NONE ||
      sc_capturing(stream))
    return rc;
  const std::string keep = sc_error_text();
  sc_call_words(c, coll, 0, 0, 0, 0, 0);
  c->call[3] = SC_CALL_REFUSED;
  {
    ScDeviceGuard g(c->device);
    if (!g.rc) (void)sc_launch_barrier(c, (gpuStream_t)stream);
  }
  sc_set_error_text(keep.c_str());
  return rc;
}
extern "C" int sc_comm_refuse(sc_comm_t c, int collective, void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_comm_refuse: communicator is null");
  if (collective < SC_COLL_ALLREDUCE || collective > SC_COLL_BARRIER)
    return sc_fail(SC_ERR_INVALID_ARG, "sc_comm_refuse: unknown collective %d", collective);
  return sc_refuse(c, collective, stream, SC_OK);
}

#define SC_REFUSE(coll, call)                        \
  do {                                               \
    const int rc_ = (call);                          \
    if (rc_ != SC_OK) return sc_refuse(c, coll, stream, rc_); \
  } while (0)

// The start of every call: its call words (sc_call_words), and a barrier kernel, which carries the
// call header, for the calls that otherwise launch no kernel of ours yet must meet their peers' calls:
// an empty call, and a vendor call (the vendor library cannot check that the peers make the same
// call; the barrier costs microseconds against the milliseconds of a call that size). Under graph
// capture neither launches it (sc_no_capture: our kernels are not captured): an empty call is then a
// no-op, and a vendor call runs unchecked. *done: nothing is left to do.
static int sc_call_begin(sc_comm* c, int coll, size_t count, int dtype, int op, int root, int proto, void* stream,
                         bool* done) {
  *done = false;
  sc_call_words(c, coll, count, dtype, op, root, proto);
  if (count != 0 && proto != SC_PROTO_VENDOR) return SC_OK;
  *done = count == 0;
  if (c->nranks < 2 || sc_capturing(stream)) return SC_OK;
  SC_TRY(sc_ready(c));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  return sc_launch_barrier(c, (gpuStream_t)stream);
}

extern "C" int sc_allreduce(sc_comm_t c, const void* send, void* recv, size_t count, int dtype, int op,
                            double factor, int algo, void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_allreduce: communicator is null");
  SC_REFUSE(SC_COLL_ALLREDUCE, sc_check_reduce_args(c, send, recv, dtype, op, "sc_allreduce"));
  int proto = SC_PROTO_FLAT;
  SC_REFUSE(SC_COLL_ALLREDUCE, sc_allreduce_protocol(c, count, dtype, op, algo, &proto));
  bool done = false;
  SC_TRY(sc_call_begin(c, SC_COLL_ALLREDUCE, count, dtype, op, 0, proto, stream, &done));
  if (done) return SC_OK;
  if (proto == SC_PROTO_LP) return sc_lp_allreduce(c, send, recv, count, dtype, op, stream);
  if (proto == SC_PROTO_VENDOR) return sc_vendor_allreduce(c, send, recv, count, dtype, op, factor, (gpuStream_t)stream);
  SC_TRY(sc_ready(c));
  SC_TRY(sc_no_capture(c, stream));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const int n = c->nranks;
  const size_t es = sc_dtype_size(dtype);
  const size_t V = 16 / es;
  const size_t units_all = (count + V - 1) / V;
  // Lamport and LL run the whole call as one chunk (sc_allreduce_protocol checked that it fits).
  const size_t cap_units = proto == SC_PROTO_LAMPORT || proto == SC_PROTO_LL ? units_all
                           : proto == SC_PROTO_FLAT                          ? c->half / (16 * (size_t)n)
                                                                             : (c->half / (32 * (size_t)n)) * (size_t)n;
  const size_t cap = cap_units * V;
  gpuStream_t st = (gpuStream_t)stream;
  for (size_t off = 0; off < count; off += cap) {
    const size_t len = count - off < cap ? count - off : cap;
    const char* s = (const char*)send + off * es;
    char* r = (char*)recv + off * es;
#define SC_CALL_AR(DT, OP) sc_launch_allreduce_t<DT, OP>(c, proto, s, r, len, factor, st)
    SC_ALL_TYPES(SC_CALL_AR)
#undef SC_CALL_AR
    SC_TRY(sc_launch_check(c, proto == SC_PROTO_LAMPORT ? "allreduce_lamport" : proto == SC_PROTO_LL ? "allreduce_ll" : proto == SC_PROTO_FLAT ? "allreduce_flat" : "allreduce_tree"));
  }
  return SC_OK;
}

extern "C" int sc_reducescatter(sc_comm_t c, const void* send, void* recv, size_t recv_count, int dtype, int op,
                                double factor, int algo, void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_reducescatter: communicator is null");
  SC_REFUSE(SC_COLL_REDUCESCATTER, sc_check_reduce_args(c, send, recv, dtype, op, "sc_reducescatter"));
  int proto = SC_PROTO_FLAT;
  SC_REFUSE(SC_COLL_REDUCESCATTER, sc_plan(c, SC_COLL_REDUCESCATTER, recv_count, dtype, op, algo, &proto));
  bool done = false;
  SC_TRY(sc_call_begin(c, SC_COLL_REDUCESCATTER, recv_count, dtype, op, 0, proto, stream, &done));
  if (done) return SC_OK;
  if (proto == SC_PROTO_LP) return sc_reducescatter_lp(c, send, recv, recv_count, dtype, op, stream);
  if (proto == SC_PROTO_VENDOR) return sc_vendor_reducescatter(c, send, recv, recv_count, dtype, op, factor, stream);
  SC_TRY(sc_ready(c));
  SC_TRY(sc_no_capture(c, stream));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const size_t es = sc_dtype_size(dtype);
  const size_t cap = (c->half / (16 * (size_t)c->nranks)) * (16 / es);
  gpuStream_t st = (gpuStream_t)stream;
  for (size_t off = 0; off < recv_count; off += cap) {
    const size_t len = recv_count - off < cap ? recv_count - off : cap;
    const char* s = (const char*)send + off * es;
    char* r = (char*)recv + off * es;
#define SC_CALL_RS(DT, OP) sc_launch_rs_t<DT, OP>(c, s, r, len, recv_count, factor, st)
    SC_ALL_TYPES(SC_CALL_RS)
#undef SC_CALL_RS
    SC_TRY(sc_launch_check(c, "reducescatter"));
  }
  return SC_OK;
}

template <int KIND>
static int sc_exchange(sc_comm* c, const void* send, void* recv, size_t count, int dtype, int root, void* stream,
                       const char* what) {
  const int coll = KIND == SC_X_ALLGATHER ? SC_COLL_ALLGATHER : KIND == SC_X_ALLTOALL ? SC_COLL_ALLTOALL : SC_COLL_BROADCAST;
  const size_t es = sc_dtype_size(dtype);
  if (!es) return sc_refuse(c, coll, stream, sc_fail(SC_ERR_INVALID_ARG, "%s: unknown dtype %d", what, dtype));
  if (!recv || (!send && !(KIND == SC_X_BROADCAST && c && c->rank != root)))
    return sc_refuse(c, coll, stream, sc_fail(SC_ERR_INVALID_ARG, "%s: null buffer", what));
  if (((uintptr_t)send % es) || ((uintptr_t)recv % es))
    return sc_refuse(c, coll, stream,
                     sc_fail(SC_ERR_INVALID_ARG, "%s: buffers must be aligned to the element size (%zu)", what, es));
  if (count == 0) return SC_OK;
  SC_TRY(sc_ready(c));
  SC_TRY(sc_no_capture(c, stream));
  if (KIND == SC_X_BROADCAST && (root < 0 || root >= c->nranks))
    return sc_fail(SC_ERR_INVALID_ARG, "%s: root %d outside 0..%d", what, root, c->nranks - 1);
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  const size_t total = count * es;
  const size_t cap = KIND == SC_X_BROADCAST ? (c->half & ~(size_t)15) : ((c->half / c->nranks) & ~(size_t)15);
  const size_t stride = total;  // bytes between rank slices in send (alltoall) / recv
  gpuStream_t st = (gpuStream_t)stream;
  for (size_t off = 0; off < total; off += cap) {
    const size_t len = total - off < cap ? total - off : cap;
    const char* s = send ? (const char*)send + off : nullptr;
    char* r = (char*)recv + off;
    const int blocks = sc_blocks_for(c, (len + 15) / 16);
    switch (es) {
      case 2: sc_launch(c, sc_k_exchange<2, KIND>, blocks, (int)c->p.threads, st, c->dev, c->seq, s, r, len, stride, stride, root); break;
      case 4: sc_launch(c, sc_k_exchange<4, KIND>, blocks, (int)c->p.threads, st, c->dev, c->seq, s, r, len, stride, stride, root); break;
      default: sc_launch(c, sc_k_exchange<8, KIND>, blocks, (int)c->p.threads, st, c->dev, c->seq, s, r, len, stride, stride, root); break;
    }
    SC_TRY(sc_launch_check(c, what));
  }
  return SC_OK;
}

extern "C" int sc_allgather(sc_comm_t c, const void* send, void* recv, size_t count_per_rank, int dtype, int algo,
                            void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_allgather: communicator is null");
  int proto = SC_PROTO_FLAT;
  SC_REFUSE(SC_COLL_ALLGATHER, sc_plan(c, SC_COLL_ALLGATHER, count_per_rank, dtype, SC_SUM, algo, &proto));
  bool done = false;
  SC_TRY(sc_call_begin(c, SC_COLL_ALLGATHER, count_per_rank, dtype, 0, 0, proto, stream, &done));
  if (done) return SC_OK;
  if (proto == SC_PROTO_LP) return sc_allgather_lp(c, send, recv, count_per_rank, dtype, stream);
  if (proto == SC_PROTO_VENDOR) return sc_vendor_allgather(c, send, recv, count_per_rank, dtype, stream);
  return sc_exchange<SC_X_ALLGATHER>(c, send, recv, count_per_rank, dtype, 0, stream, "sc_allgather");
}
extern "C" int sc_alltoall(sc_comm_t c, const void* send, void* recv, size_t count_per_peer, int dtype, int algo,
                           void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoall: communicator is null");
  int proto = SC_PROTO_FLAT;
  SC_REFUSE(SC_COLL_ALLTOALL, sc_plan(c, SC_COLL_ALLTOALL, count_per_peer, dtype, SC_SUM, algo, &proto));
  bool done = false;
  SC_TRY(sc_call_begin(c, SC_COLL_ALLTOALL, count_per_peer, dtype, 0, 0, proto, stream, &done));
  if (done) return SC_OK;
  if (proto == SC_PROTO_LP) return sc_alltoall_lp(c, send, recv, count_per_peer, dtype, stream);
  return sc_exchange<SC_X_ALLTOALL>(c, send, recv, count_per_peer, dtype, 0, stream, "sc_alltoall");
}
extern "C" int sc_broadcast(sc_comm_t c, const void* send, void* recv, size_t count, int dtype, int root, int algo,
                            void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_broadcast: communicator is null");
  int proto = SC_PROTO_FLAT;
  SC_REFUSE(SC_COLL_BROADCAST, sc_plan(c, SC_COLL_BROADCAST, count, dtype, SC_SUM, algo, &proto));
  if (root < 0 || root >= c->nranks)
    return sc_refuse(c, SC_COLL_BROADCAST, stream,
                     sc_fail(SC_ERR_INVALID_ARG, "sc_broadcast: root %d outside 0..%d", root, c->nranks - 1));
  bool done = false;
  SC_TRY(sc_call_begin(c, SC_COLL_BROADCAST, count, dtype, 0, root, proto, stream, &done));
  if (done) return SC_OK;
  if (proto == SC_PROTO_VENDOR) return sc_vendor_broadcast(c, send, recv, count, dtype, root, stream);
  return sc_exchange<SC_X_BROADCAST>(c, send, recv, count, dtype, root, stream, "sc_broadcast");
}

// ---- allToAllV with device-resident sizes (dda_alltoallv.cuh) ----
extern "C" int sc_alltoallv(sc_comm_t c, const void* send, size_t send_capacity, const int64_t* send_counts,
                            const int64_t* send_offsets, void* recv, size_t recv_capacity, int64_t* recv_counts,
                            const int64_t* recv_offsets, int dtype, void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: communicator is null");
  if (dtype < SC_FLOAT32 || dtype > SC_INT64) return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: unknown dtype %d", dtype);
  if (!send_counts || !recv_counts) return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: null counts");
  if ((send_offsets == nullptr) != (recv_offsets == nullptr))
    return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: give both send and receive offsets, or neither (packed)");
  if ((send_capacity && !send) || (recv_capacity && !recv)) return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: null buffer");
  const size_t es = sc_dtype_size(dtype);
  // Capacities bound every count the kernel accepts, so count * es cannot wrap.
  if (send_capacity > (size_t)INT64_MAX / es || recv_capacity > (size_t)INT64_MAX / es)
    return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: capacity too large");
  {
    // In place is not supported on the device (the self block and the rounds would overwrite input
    // still to be sent), and recv_counts must not alias what every block reads before the size
    // exchange (another block of this rank may still be reading it when block 0 writes recv_counts).
    auto overlap = [](const void* a, size_t an, const void* b, size_t bn) {
      const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
      return a && b && an && bn && x < y + bn && y < x + an;
    };
    const size_t cb = (size_t)c->nranks * sizeof(int64_t);
    if (overlap(send, send_capacity * es, recv, recv_capacity * es))
      return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: send and recv overlap (in place is not supported on the GPU)");
    if (overlap(recv_counts, cb, send_counts, cb) || overlap(recv_counts, cb, send_offsets, cb) ||
        overlap(recv_counts, cb, recv_offsets, cb) || overlap(recv_counts, cb, send, send_capacity * es) ||
        overlap(recv_counts, cb, recv, recv_capacity * es))
      return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: recv_counts overlaps another argument");
  }
  if (((uintptr_t)send % es) || ((uintptr_t)recv % es) || ((uintptr_t)send_counts % 8) || ((uintptr_t)recv_counts % 8) ||
      ((uintptr_t)send_offsets % 8) || ((uintptr_t)recv_offsets % 8))
    return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv: buffers must be aligned to their element size");
  SC_TRY(sc_ready(c));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  ScA2avArgs a;
  a.send = (const char*)send;
  a.recv = (char*)recv;
  a.send_counts = send_counts;
  a.send_offsets = send_offsets;
  a.recv_counts = recv_counts;
  a.recv_offsets = recv_offsets;
  a.in_count = (int64_t)send_capacity;
  a.out_count = (int64_t)recv_capacity;
  a.dtype = dtype;
  // The grid is fixed (not sized from the counts, which live on the device): every rank must launch
  // the same grid, and the kernel's per-block barriers pair block b with block b.
  const int grid = SC_A2AV_BLOCKS < SC_MAX_BLOCKS ? SC_A2AV_BLOCKS : SC_MAX_BLOCKS;
  gpuStream_t st = (gpuStream_t)stream;
  // Launched without advancing c->seq: the kernel's epochs live on the device, and the staging halves
  // of the other collectives alternate by seq — a launch that is only captured into a graph (and does
  // not run now) must not shift that alternation for the eager operations around it.
  gpuError_t e;
  switch (es) {
    case 2: e = sc_launch_raw(c, sc_k_alltoallv<2>, grid, (int)c->p.threads, st, c->dev, (uint64_t)0, a); break;
    case 4: e = sc_launch_raw(c, sc_k_alltoallv<4>, grid, (int)c->p.threads, st, c->dev, (uint64_t)0, a); break;
    default: e = sc_launch_raw(c, sc_k_alltoallv<8>, grid, (int)c->p.threads, st, c->dev, (uint64_t)0, a); break;
  }
  if (e == gpuSuccess) e = gpuGetLastError();
  c->launch_err = e;
  return sc_launch_check(c, "alltoallv");
}

extern "C" int sc_alltoallv_status(sc_comm_t c, long long* status) {
  if (!c || !status) return sc_fail(SC_ERR_INVALID_ARG, "sc_alltoallv_status: null argument");
  volatile long long* w = (volatile long long*)(c->host_words + 32);
  status[0] = w[0];
  std::atomic_thread_fence(std::memory_order_acquire);  // the code is written last (after a system fence)
  for (int i = 1; i < 5; ++i) status[i] = w[i];
  if (status[0] != SC_A2AV_OK) {
    for (int i = 1; i < 5; ++i) w[i] = 0;
    std::atomic_thread_fence(std::memory_order_release);
    w[0] = 0;  // the code last: a kernel writing a new record sees a cleared slot only once it is whole
  }
  return SC_OK;
}

extern "C" int sc_agree(sc_comm_t c, const void* send, void* recv, size_t words, int tag, void* stream) {
  if (!c) return sc_fail(SC_ERR_INVALID_ARG, "sc_agree: communicator is null");
  if (tag < 1 || tag > 255) return sc_refuse(c, SC_COLL_ALLGATHER, stream, sc_fail(SC_ERR_INVALID_ARG, "sc_agree: tag %d outside 1..255", tag));
  bool done = false;
  // the tag in the header's root word: a direct allGather's is 0, so the two never pass each other
  SC_TRY(sc_call_begin(c, SC_COLL_ALLGATHER, words, SC_INT64, 0, tag, SC_PROTO_FLAT, stream, &done));
  if (done) return SC_OK;
  return sc_exchange<SC_X_ALLGATHER>(c, send, recv, words, SC_INT64, 0, stream, "sc_agree");
}

extern "C" int sc_barrier(sc_comm_t c, void* stream) {
  SC_TRY(sc_ready(c));
  sc_call_words(c, SC_COLL_BARRIER, 0, 0, 0, 0, SC_PROTO_FLAT);
  SC_TRY(sc_no_capture(c, stream));
  ScDeviceGuard g(c->device);
  if (g.rc) return g.rc;
  return sc_launch_barrier(c, (gpuStream_t)stream);
}
