// sc_gpu_test: C-level correctness test and benchmark of the sparkcomms GPU library.
//
//   sc_gpu_test [--ranks N] [--seed S] [--no-mp] [--no-sp] [--no-bench] [--bench-only]
//               [--bench-max BYTES] [--iters N] [--csv FILE] [--md FILE]
//               [--lp] [--lp-only] [--lp-big] [--lp-bench]   (FP8 low-precision tests / benchmark)
//               [--lp-sweep 'opt=v,opt=v;opt=v;...']   (LP one-shot time per option set, 16 MB ..)
//               [--lp-trace]   (GPU timeline of the LP one-shot's chunk kernels, fp32 16 MB ..)
//               [--sweep]   (with --bench-only: LL / Lamport block size x block cap vs the barrier one-shot, 1..512 KB)
//               [--mismatch-only]   (ranks that make different calls, every protocol)
//               [--a2av] [--a2av-only] [--a2av-bench] [--a2av-csv FILE]   (allToAllV, device counts)
//               [--vclose] [--vclose-only] [--vclose-rounds N] [--vclose-comms K] [--vclose-a2av]
//                                                   (vendor communicators closed at once)
//
// Modes (all by default):
//   mp    one process per GPU (fork), blobs exchanged through files in a private temp dir
//   sp    all ranks in one process (one thread per rank), direct peer pointers
//   bench (mp) allreduce fp32 + bf16, 1 KB .. 1 GB: DDA flat, tree vs NCCL in the same run
//   vclose (only with --vclose / --vclose-only) all ranks in one process, one thread and one GPU per
//         rank; per round K (3) communicators per rank with vendor communicators, each used for vendor
//         allreduce, allgather, reducescatter, broadcast (+ allToAllV with --vclose-a2av), then every
//         rank closes them at the same moment (every 4th round: sc_comm_abort first); 20 rounds
// Uses only the C ABI (sparkcomms.h). Exit status 0 only when every check passed.
#include "sparkcomms.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

// ------------------------------------------------------------------------------------------
// small helpers
// ------------------------------------------------------------------------------------------
static double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Ctx;
static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FATAL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stderr);
  _exit(3);
}

#define SC(call)                                                                               \
  do {                                                                                         \
    int rc_ = (call);                                                                          \
    if (rc_ != SC_OK) die("%s:%d %s -> %s: %s", __FILE__, __LINE__, #call, sc_status_name(rc_), \
                          sc_last_error());                                                    \
  } while (0)

// A communicator setting in effect (the library's default, the environment's, or what was set).
static long long option(sc_comm_t comm, const char* key) {
  long long v = 0;
  SC(sc_comm_get_option(comm, key, &v));
  return v;
}

static uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double urand(uint64_t& s) { return (splitmix(s) >> 11) * (1.0 / 9007199254740992.0); }

static uint16_t f2bf(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf2f(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint16_t f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
  if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) {
    if (a < 0x33000000u) return (uint16_t)sign;
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, sh = 126 - e;
    uint32_t r = m >> sh;
    const uint32_t rem = m & ((1u << sh) - 1), half = 1u << (sh - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = a - 0x38000000u;
  r = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
  return (uint16_t)(sign | r);
}
static float h2f(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ffu, u;
  if (e == 0) {
    if (m == 0) u = sign;
    else {
      float f = (float)m * (1.0f / 16777216.0f);
      memcpy(&u, &f, 4);
      u |= sign;
    }
  } else if (e == 31) u = sign | 0x7f800000u | (m << 13);
  else u = sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static const char* DT_NAME[] = {"fp32", "bf16", "fp16", "fp64", "int32", "int64"};
static const size_t DT_SIZE[] = {4, 2, 2, 8, 4, 8};
static const char* OP_NAME[] = {"sum", "avg", "min", "max", "prod", "premul"};
static const char* ALGO_NAME[] = {"auto", "flat", "tree", "lp", "vendor"};
static bool is_int(int dt) { return dt == SC_INT32 || dt == SC_INT64; }

static double getf(const void* b, int dt, size_t i) {
  switch (dt) {
    case SC_FLOAT32: return ((const float*)b)[i];
    case SC_BFLOAT16: return bf2f(((const uint16_t*)b)[i]);
    case SC_FLOAT16: return h2f(((const uint16_t*)b)[i]);
    case SC_FLOAT64: return ((const double*)b)[i];
    case SC_INT32: return ((const int32_t*)b)[i];
    default: return (double)((const int64_t*)b)[i];
  }
}
static int64_t geti(const void* b, int dt, size_t i) {
  return dt == SC_INT32 ? (int64_t)((const int32_t*)b)[i] : ((const int64_t*)b)[i];
}
static void putf(void* b, int dt, size_t i, double v) {
  switch (dt) {
    case SC_FLOAT32: ((float*)b)[i] = (float)v; break;
    case SC_BFLOAT16: ((uint16_t*)b)[i] = f2bf((float)v); break;
    case SC_FLOAT16: ((uint16_t*)b)[i] = f2h((float)v); break;
    case SC_FLOAT64: ((double*)b)[i] = v; break;
    case SC_INT32: ((int32_t*)b)[i] = (int32_t)v; break;
    default: ((int64_t*)b)[i] = (int64_t)v; break;
  }
}
static uint64_t fnv(const void* p, size_t n) {
  const unsigned char* c = (const unsigned char*)p;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

// Deterministic input of rank q for a case.
static void gen_input(std::vector<unsigned char>& buf, int dt, int op, size_t count, uint64_t seed, int q) {
  buf.resize(count * DT_SIZE[dt] + 16);
  uint64_t s = seed * 1000003ull + (uint64_t)q * 7919ull + 17;
  void* b = buf.data();
  if (is_int(dt)) {
    for (size_t i = 0; i < count; ++i) {
      uint64_t r = splitmix(s);
      if (dt == SC_INT32) ((int32_t*)b)[i] = (op == SC_AVG || op == SC_SUM) ? (int32_t)(r % 2000000001ull) - 1000000000 : (int32_t)r;
      else ((int64_t*)b)[i] = (int64_t)r;
    }
  } else {
    for (size_t i = 0; i < count; ++i) {
      double v = urand(s) * 2.0 - 1.0;
      if (op == SC_PRODUCT) v = (v < 0 ? -1.0 : 1.0) * (0.75 + 0.5 * fabs(v));
      putf(b, dt, i, v);
    }
  }
}

// ------------------------------------------------------------------------------------------
// rendezvous through files (works across processes and threads)
// ------------------------------------------------------------------------------------------
struct Exchanger {
  std::string dir;
  int rank, n;
  uint64_t tag = 0;
  void allgather(const void* mine, size_t len, void* all) {
    ++tag;
    char path[512], tmp[600];
    snprintf(path, sizeof(path), "%s/x%llu_r%d", dir.c_str(), (unsigned long long)tag, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE* f = fopen(tmp, "wb");
    if (!f || fwrite(mine, 1, len, f) != len || fclose(f) != 0) die("rendezvous write %s: %s", tmp, strerror(errno));
    if (rename(tmp, path) != 0) die("rename %s: %s", path, strerror(errno));
    const double t0 = now_s();
    for (int q = 0; q < n; ++q) {
      char pq[512];
      snprintf(pq, sizeof(pq), "%s/x%llu_r%d", dir.c_str(), (unsigned long long)tag, q);
      for (;;) {
        FILE* g = fopen(pq, "rb");
        if (g) {
          size_t got = fread((char*)all + (size_t)q * len, 1, len, g);
          fclose(g);
          if (got == len) break;
        }
        if (now_s() - t0 > 300) die("rank %d: rendezvous timeout waiting for rank %d (tag %llu)", rank, q, (unsigned long long)tag);
        usleep(200);
      }
    }
  }
  void barrier() {
    char b = 1;
    std::vector<char> all(n);
    allgather(&b, 1, all.data());
  }
};

// ------------------------------------------------------------------------------------------
// per-rank test context
// ------------------------------------------------------------------------------------------
struct Ctx {
  int rank, n, device;
  const char* mode;
  Exchanger ex;
  uint64_t seed;
  sc_comm_t comm = nullptr;
  void* stream = nullptr;
  bool vendor = false;
  int fails = 0, passes = 0;
  int exact_cases = 0;  // allReduce cases also held to the fp32 rank-order bits (check_fp32_order)
  std::vector<uint64_t> hashes;  // allreduce output hashes, compared across ranks at the end
  std::vector<std::string> case_names;
  bool verbose;
  void log(const char* fmt, ...) {
    if (rank != 0 && !verbose) return;
    va_list ap;
    va_start(ap, fmt);
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    printf("[%s r%d] %s\n", mode, rank, buf);
    fflush(stdout);
  }
  void fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    printf("[%s r%d] FAIL %s\n", mode, rank, buf);
    fflush(stdout);
    ++fails;
  }
  void check(bool ok, const char* fmt, ...) {
    if (ok) {
      ++passes;
      return;
    }
    va_list ap;
    va_start(ap, fmt);
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fail("%s", buf);
  }
};

static const size_t GUARD = 64;
static thread_local bool vendor16 = false;  // looser tolerance for the vendor's 16-bit PREMUL_SUM

struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  void ensure(size_t b) {
    if (b <= bytes) return;
    if (p) SC(sc_free(p));
    SC(sc_malloc(&p, b));
    bytes = b;
  }
  ~DevBuf() {
    if (p) sc_free(p);
  }
};

// Compare one float output element with the float64 reference.
static bool close_enough(double out, double ref, double scale, int dt, int op) {
  if (std::isnan(out)) return false;
  if (op == SC_MIN || op == SC_MAX) return out == ref;
  if (vendor16) return fabs(out - ref) <= (dt == SC_BFLOAT16 ? 3.0 / 128 : 3.0 / 512) * scale;
  const double rel = dt == SC_FLOAT32 ? 2e-6 : dt == SC_BFLOAT16 ? 1.0 / 128 : dt == SC_FLOAT16 ? 1.0 / 512 : 1e-13;
  const double acc = dt == SC_FLOAT64 ? 1e-13 : 2e-6;
  if (op == SC_PRODUCT) return fabs(out - ref) <= (rel + acc * 8) * fabs(ref) + 1e-30;
  return fabs(out - ref) <= rel * fabs(ref) + acc * scale + (dt == SC_FLOAT16 ? 1e-7 : 1e-300);
}

// Reference reduction of element i over ranks. Floats in float64; ints with the library's
// documented wrap-around semantics.
struct RefOut {
  double f;
  int64_t i;
  double scale;
};
static RefOut ref_reduce(const std::vector<std::vector<unsigned char>>& in, size_t off, int dt, int op, double factor, int n) {
  RefOut r{0, 0, 0};
  if (is_int(dt)) {
    int64_t acc = geti(in[0].data(), dt, off);
    for (int q = 1; q < n; ++q) {
      int64_t x = geti(in[q].data(), dt, off);
      switch (op) {
        case SC_SUM: case SC_AVG: acc = (int64_t)((uint64_t)acc + (uint64_t)x); break;
        case SC_MIN: acc = std::min(acc, x); break;
        case SC_MAX: acc = std::max(acc, x); break;
        case SC_PRODUCT: acc = (int64_t)((uint64_t)acc * (uint64_t)x); break;
      }
    }
    if (op == SC_AVG) acc /= n;
    if (dt == SC_INT32) acc = (int32_t)(uint32_t)(uint64_t)acc;
    r.i = acc;
    return r;
  }
  double acc = 0, scale = 0;
  for (int q = 0; q < n; ++q) {
    double x = getf(in[q].data(), dt, off);
    if (op == SC_PREMUL_SUM) x *= (dt == SC_FLOAT64 ? factor : (double)(float)factor);
    scale += fabs(x);
    if (q == 0) acc = x;
    else switch (op) {
        case SC_SUM: case SC_AVG: case SC_PREMUL_SUM: acc += x; break;
        case SC_MIN: acc = std::min(acc, x); break;
        case SC_MAX: acc = std::max(acc, x); break;
        case SC_PRODUCT: acc *= x; break;
      }
  }
  if (op == SC_AVG) {
    acc /= n;
    scale /= n;
  }
  r.f = acc;
  r.scale = scale;
  return r;
}

// Checks out[0..count) against the reference of input element (base + i). Returns #bad.
static size_t check_reduced(Ctx& c, const char* name, const unsigned char* out, size_t count,
                            const std::vector<std::vector<unsigned char>>& in, size_t base, int dt, int op,
                            double factor, double* max_rel) {
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    RefOut r = ref_reduce(in, base + i, dt, op, factor, c.n);
    bool ok;
    double o = 0;
    if (is_int(dt)) {
      ok = geti(out, dt, i) == r.i;
    } else {
      o = getf(out, dt, i);
      ok = close_enough(o, r.f, r.scale, dt, op);
      double den = std::max(fabs(r.f), 1e-30);
      if (!std::isnan(o)) *max_rel = std::max(*max_rel, fabs(o - r.f) / std::max(den, r.scale * 1e-3));
    }
    if (!ok) {
      if (bad < 4) {
        if (is_int(dt)) c.fail("%s: element %zu = %lld, expected %lld", name, i, (long long)geti(out, dt, i), (long long)r.i);
        else c.fail("%s: element %zu = %.9g, expected %.9g (scale %.3g)", name, i, o, r.f, r.scale);
        --c.fails;  // counted once per case below
      }
      ++bad;
    }
  }
  return bad;
}

// The DDA kernels' contract for fp32 / bf16 / fp16 SUM, AVG and PRODUCT: accumulate in fp32 in rank
// order 0..n-1 (AVG: then divide by n in fp32) and round once to the element type. The host repeats
// that arithmetic, so every output element must match it bit for bit (at 3+ ranks this also fixes the
// order). Returns #elements that differ.
static size_t check_fp32_order(Ctx& c, const char* name, const unsigned char* out, size_t count,
                               const std::vector<std::vector<unsigned char>>& in, int dt, int op) {
  size_t bad = 0;
  const size_t es = DT_SIZE[dt];
  unsigned char want[4];
  for (size_t i = 0; i < count; ++i) {
    float acc = (float)getf(in[0].data(), dt, i);
    for (int q = 1; q < c.n; ++q) {
      const float x = (float)getf(in[q].data(), dt, i);
      acc = op == SC_PRODUCT ? acc * x : acc + x;
    }
    if (op == SC_AVG) acc /= (float)c.n;
    putf(want, dt, 0, acc);  // float -> double -> float is exact: one rounding, to the element type
    if (memcmp(out + i * es, want, es) != 0) {
      if (bad < 4) {
        c.fail("%s: element %zu = %.9g is not the fp32 rank-order result %.9g", name, i, getf(out, dt, i), getf(want, dt, 0));
        --c.fails;  // counted once per case by the caller
      }
      ++bad;
    }
  }
  return bad;
}

static bool guard_ok(const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0xFF) return false;
  return true;
}

#include "sc_lp_test.inc"
#include "sc_a2av_test.inc"
#include "sc_mismatch_test.inc"

// ------------------------------------------------------------------------------------------
// correctness suite
// ------------------------------------------------------------------------------------------
// The protocol policy (sc_plan, the decision sc_allreduce itself runs) on settings chosen here,
// restored afterwards: one-shot Lamport for small floating-point calls, LL for the other types and
// up to ll_max_bytes, the barrier one-shot up to flat_max_bytes, tree above, LP when asked for or
// switched on from lp_min_bytes, and the errors of requests that cannot be served.
static void check_plan(Ctx& c) {
  const char* keys[] = {"flat_max_bytes", "tree_max_bytes", "lamport_max_bytes", "ll_max_bytes", "lp_allreduce",
                        "lp_min_bytes", "lp_allgather"};
  long long saved[7];
  for (int i = 0; i < 7; ++i) saved[i] = option(c.comm, keys[i]);
  const long long set[7] = {1 << 20, 16 << 20, 64 << 10, 128 << 10, 0, 1 << 20, 0};
  for (int i = 0; i < 7; ++i) SC(sc_comm_set_option(c.comm, keys[i], set[i]));
  struct Case { int coll; size_t count; int dt; int op; int algo; int want; } cases[] = {
      {SC_COLL_ALLREDUCE, 1024, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_LAMPORT},
      {SC_COLL_ALLREDUCE, 1024, SC_BFLOAT16, SC_MAX, SC_ALGO_FLAT, SC_PROTO_LAMPORT},
      {SC_COLL_ALLREDUCE, 1024, SC_INT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_LL},
      {SC_COLL_ALLREDUCE, 25600, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_LL},
      {SC_COLL_ALLREDUCE, 131072, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_FLAT},
      {SC_COLL_ALLREDUCE, 1024, SC_FLOAT32, SC_SUM, SC_ALGO_TREE, SC_PROTO_TREE},
      {SC_COLL_ALLREDUCE, 2 << 20, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_TREE},
      {SC_COLL_ALLREDUCE, 1024, SC_FLOAT32, SC_AVG, SC_ALGO_LP, SC_PROTO_LP},
      {SC_COLL_ALLGATHER, 1 << 20, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_FLAT},
      {SC_COLL_BROADCAST, 1 << 20, SC_INT64, SC_SUM, SC_ALGO_AUTO, SC_PROTO_FLAT},
      {SC_COLL_BARRIER, 0, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, SC_PROTO_FLAT},
  };
  for (const Case& k : cases) {
    int got = -1;
    const int rc = sc_plan(c.comm, k.coll, k.count, k.dt, k.op, k.algo, &got);
    c.check(rc == SC_OK && got == k.want, "sc_plan(collective %d, count %zu, dtype %d, algo %d): %s, want %s (rc %d: %s)",
            k.coll, k.count, k.dt, k.algo, sc_protocol_name(got), sc_protocol_name(k.want), rc, rc ? sc_last_error() : "");
  }
  int got = -1;
  c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1024, SC_INT32, SC_SUM, SC_ALGO_LP, &got) == SC_ERR_UNSUPPORTED,
          "sc_plan: LP of int32 accepted");
  c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1024, 99, SC_SUM, SC_ALGO_AUTO, &got) == SC_ERR_INVALID_ARG, "sc_plan: dtype 99 accepted");
  c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1024, SC_FLOAT32, SC_SUM, 9, &got) == SC_ERR_INVALID_ARG, "sc_plan: algo 9 accepted");
  c.check(sc_plan(c.comm, 42, 1024, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, &got) == SC_ERR_INVALID_ARG, "sc_plan: collective 42 accepted");
  // A request sc_plan refuses, the entry point refuses alike (before it looks at the buffers).
  c.check(sc_plan(c.comm, SC_COLL_ALLTOALL, 1024, SC_FLOAT32, SC_SUM, SC_ALGO_VENDOR, &got) == SC_ERR_UNSUPPORTED &&
              sc_alltoall(c.comm, nullptr, nullptr, 1024, SC_FLOAT32, SC_ALGO_VENDOR, c.stream) == SC_ERR_UNSUPPORTED,
          "allToAll VENDOR: sc_plan and sc_alltoall disagree");
  c.check(sc_plan(c.comm, SC_COLL_ALLGATHER, 1024, SC_INT32, SC_SUM, SC_ALGO_LP, &got) == SC_ERR_UNSUPPORTED &&
              sc_allgather(c.comm, nullptr, nullptr, 1024, SC_INT32, SC_ALGO_LP, c.stream) == SC_ERR_UNSUPPORTED,
          "allGather LP of int32: sc_plan and sc_allgather disagree");
  if (!c.vendor)
    c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1024, SC_FLOAT32, SC_SUM, SC_ALGO_VENDOR, &got) != SC_OK, "VENDOR planned without a vendor communicator");
  SC(sc_comm_set_option(c.comm, "lp_allreduce", 1));
  SC(sc_comm_set_option(c.comm, "lp_allgather", 1));
  c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1 << 20, SC_FLOAT32, SC_SUM, SC_ALGO_AUTO, &got) == SC_OK && got == SC_PROTO_LP,
          "sc_plan: lp_allreduce on, 4 MB fp32: %s", sc_protocol_name(got));
  c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1 << 20, SC_INT32, SC_SUM, SC_ALGO_AUTO, &got) == SC_OK && got == SC_PROTO_TREE,
          "sc_plan: lp_allreduce on, 4 MB int32: %s", sc_protocol_name(got));
  c.check(sc_plan(c.comm, SC_COLL_ALLREDUCE, 1 << 20, SC_FLOAT32, SC_SUM, SC_ALGO_FLAT, &got) == SC_OK && got == SC_PROTO_FLAT,
          "sc_plan: lp_allreduce on, forced FLAT: %s", sc_protocol_name(got));
  c.check(sc_plan(c.comm, SC_COLL_ALLGATHER, 1 << 20, SC_BFLOAT16, SC_SUM, SC_ALGO_AUTO, &got) == SC_OK && got == SC_PROTO_LP,
          "sc_plan: lp_allgather on: %s", sc_protocol_name(got));
  c.check(sc_comm_set_option(c.comm, "lp_threads", 300) == SC_ERR_INVALID_ARG, "lp_threads 300 accepted");
  c.check(sc_comm_set_option(c.comm, "no_such_option", 1) == SC_ERR_INVALID_ARG, "an unknown option accepted");
  c.check(sc_comm_set_option(c.comm, "staging_bytes", 1 << 20) == SC_ERR_INVALID_ARG, "staging_bytes changed after create");
  for (int i = 0; i < 7; ++i) SC(sc_comm_set_option(c.comm, keys[i], saved[i]));
  c.log("protocol policy checked: %d passed, %d failed so far", c.passes, c.fails);
}

static void run_correctness(Ctx& c, size_t staging) {
  const int n = c.n, r = c.rank;
  check_plan(c);
  std::vector<size_t> counts = {1, 7, 1023, (1u << 20) + 3};
  DevBuf dsend, drecv;
  std::vector<std::vector<unsigned char>> in(n);
  std::vector<unsigned char> out;
  uint64_t case_id = 0;
  const double factor = 0.37;
  int algos[] = {SC_ALGO_FLAT, SC_ALGO_TREE, SC_ALGO_AUTO, SC_ALGO_VENDOR};

  auto run_case = [&](const char* coll, int dt, int op, int algo, size_t count, size_t elem_off, int root) {
    ++case_id;
    const size_t es = DT_SIZE[dt];
    char name[256];
    snprintf(name, sizeof(name), "%s %s %s %s count=%zu off=%zu", coll, DT_NAME[dt], op >= 0 ? OP_NAME[op] : "-",
             algo >= 0 ? ALGO_NAME[algo] : "-", count, elem_off);
    const bool ar = !strcmp(coll, "allreduce"), rs = !strcmp(coll, "reducescatter"), ag = !strcmp(coll, "allgather"),
               a2a = !strcmp(coll, "alltoall"), bc = !strcmp(coll, "broadcast");
    const size_t in_count = (rs || a2a) ? count * n : count;
    const size_t out_count = (ag || a2a) ? count * n : count;
    const uint64_t cs = c.seed ^ (case_id * 0x9E3779B97F4A7C15ull);
    for (int q = 0; q < n; ++q) gen_input(in[q], dt, op < 0 ? SC_SUM : op, in_count, cs, q);
    const size_t in_bytes = in_count * es, out_bytes = out_count * es;
    const size_t off_b = elem_off * es;
    dsend.ensure(in_bytes + off_b + 256);
    drecv.ensure(out_bytes + off_b + GUARD + 256);
    unsigned char* sp = (unsigned char*)dsend.p + off_b;
    unsigned char* rp = (unsigned char*)drecv.p + off_b;
    SC(sc_memcpy_htod(sp, in[r].data(), in_bytes, nullptr));
    SC(sc_memset(drecv.p, 0xFF, out_bytes + off_b + GUARD, nullptr));  // NaN / -1 poison + guard
    int rc = SC_OK;
    if (ar) rc = sc_allreduce(c.comm, sp, rp, count, dt, op, factor, algo, c.stream);
    else if (rs) rc = sc_reducescatter(c.comm, sp, rp, count, dt, op, factor, SC_ALGO_AUTO, c.stream);
    else if (ag) rc = sc_allgather(c.comm, sp, rp, count, dt, SC_ALGO_AUTO, c.stream);
    else if (a2a) rc = sc_alltoall(c.comm, sp, rp, count, dt, SC_ALGO_AUTO, c.stream);
    else if (bc) rc = sc_broadcast(c.comm, r == root ? sp : nullptr, rp, count, dt, root, SC_ALGO_AUTO, c.stream);
    if (rc != SC_OK) {
      c.fail("%s: call returned %s: %s", name, sc_status_name(rc), sc_last_error());
      return;
    }
    SC(sc_stream_synchronize(c.stream));
    if (sc_comm_check(c.comm) != SC_OK) die("%s: device error: %s", name, sc_last_error());
    out.resize(out_bytes + GUARD);
    SC(sc_memcpy_dtoh(out.data(), rp, out_bytes + GUARD, nullptr));
    size_t bad = 0;
    double max_rel = 0;
    if (!guard_ok(out.data() + out_bytes, GUARD)) {
      c.fail("%s: wrote past the end of the output", name);
      return;
    }
    if (ar) {
      double f = factor;
      if (algo == SC_ALGO_VENDOR && op == SC_PREMUL_SUM && DT_SIZE[dt] == 2) {
        // the vendor library applies the scalar in the element type, rounding each product
        f = dt == SC_BFLOAT16 ? bf2f(f2bf((float)factor)) : h2f(f2h((float)factor));
        vendor16 = true;
      }
      bad = check_reduced(c, name, out.data(), count, in, 0, dt, op, f, &max_rel);
      vendor16 = false;
      if (!bad && (algo == SC_ALGO_FLAT || algo == SC_ALGO_TREE) && (op == SC_SUM || op == SC_AVG || op == SC_PRODUCT) &&
          (dt == SC_FLOAT32 || dt == SC_BFLOAT16 || dt == SC_FLOAT16)) {
        bad = check_fp32_order(c, name, out.data(), count, in, dt, op);
        ++c.exact_cases;
      }
      c.hashes.push_back(fnv(out.data(), out_bytes));
      c.case_names.push_back(name);
    } else if (rs) {
      // reference of slice r: element i of slice r is element r*count + i of each input
      bad = check_reduced(c, name, out.data(), count, in, (size_t)r * count, dt, op, factor, &max_rel);
    } else {
      for (size_t i = 0; i < out_count; ++i) {
        const unsigned char* exp;
        if (ag) exp = in[i / count].data() + (i % count) * es;
        else if (a2a) exp = in[i / count].data() + ((size_t)r * count + i % count) * es;
        else exp = in[root].data() + i * es;
        if (memcmp(out.data() + i * es, exp, es) != 0) {
          if (bad < 4) {
            c.fail("%s: element %zu differs (got %.6g expected %.6g)", name, i, getf(out.data(), dt, i), getf(exp, dt, 0));
            --c.fails;
          }
          ++bad;
        }
      }
    }
    if (bad) c.fail("%s: %zu wrong element(s)", name, bad);
    else ++c.passes;
    (void)max_rel;
  };

  const double t0 = now_s();
  for (int dt = 0; dt < 6; ++dt) {
    std::vector<size_t> cs = counts;
    cs.push_back(staging / DT_SIZE[dt] + 1001);  // larger than the whole staging buffer
    for (int op = 0; op < 6; ++op) {
      if (is_int(dt) && op == SC_PREMUL_SUM) continue;
      for (int algo : algos) {
        if (algo == SC_ALGO_VENDOR && !c.vendor) continue;
        for (size_t cnt : cs) {
          if (algo == SC_ALGO_VENDOR && cnt > 4096) continue;  // vendor: semantics check only
          run_case("allreduce", dt, op, algo, cnt, 0, 0);
        }
        if (algo != SC_ALGO_VENDOR) run_case("allreduce", dt, op, algo, 1023, 1, 0);  // unaligned buffers
      }
      for (size_t cnt : {(size_t)1, (size_t)7, (size_t)1023, (size_t)(1u << 20) + 3}) run_case("reducescatter", dt, op, -1, cnt, 0, 0);
      run_case("reducescatter", dt, op, -1, staging / DT_SIZE[dt] / n + 77, 0, 0);
      run_case("reducescatter", dt, op, -1, 1023, 3, 0);
    }
    for (size_t cnt : cs) {
      run_case("allgather", dt, -1, -1, cnt, 0, 0);
      run_case("alltoall", dt, -1, -1, cnt, 0, 0);
      run_case("broadcast", dt, -1, -1, cnt, 0, (int)(cnt % n));
    }
    run_case("allgather", dt, -1, -1, 1023, 1, 0);
    run_case("alltoall", dt, -1, -1, 1023, 1, 0);
    run_case("broadcast", dt, -1, -1, 1023, 1, n - 1);
    c.log("%s done: %d passed, %d failed so far (%.1f s)", DT_NAME[dt], c.passes, c.fails, now_s() - t0);
  }
  // LL / Lamport shapes: at and around the LL limit (256 KB at 2 ranks, 64 KB above) and the Lamport
  // limit (512 KB at 2 ranks, 64 KB above), then ranks with different block sizes (allowed: where an
  // LL or Lamport kernel puts each element does not depend on its grid), rank 0's small enough that
  // its threads loop (several grid strides). Twice: with the Lamport protocol for the floating
  // types (the default), then with LL for them too.
  // The limits and block sizes in effect: the library's defaults or what the environment set.
  const long long lam_max = option(c.comm, "lamport_max_bytes");
  const size_t ll_max = (size_t)option(c.comm, "ll_max_bytes");
  const long long ll_thr = option(c.comm, "ll_threads"), lam_thr = option(c.comm, "lamport_threads");
  for (int lamport : {1, 0}) {
    SC(sc_comm_set_option(c.comm, "lamport_max_bytes", lamport ? lam_max : 0));
    if (ll_max >= 64 && ll_max <= ((size_t)16 << 20)) {
      for (int dt : {SC_FLOAT32, SC_BFLOAT16}) {
        const size_t at = ll_max / DT_SIZE[dt];
        for (size_t cnt : {at - 3, at, at + 1}) run_case("allreduce", dt, SC_SUM, SC_ALGO_FLAT, cnt, 0, 0);
        const size_t lat = (size_t)lam_max / DT_SIZE[dt];
        if (lamport && lat > 3 && lat != at)
          for (size_t cnt : {lat - 3, lat, lat + 1}) run_case("allreduce", dt, SC_SUM, SC_ALGO_FLAT, cnt, 0, 0);
      }
      SC(sc_comm_set_option(c.comm, "ll_threads", r == 0 ? 32 : 96));
      SC(sc_comm_set_option(c.comm, "lamport_threads", r == 0 ? 32 : 96));
      for (int dt : {SC_FLOAT32, SC_BFLOAT16, SC_FLOAT16})
        for (int op : {SC_SUM, SC_MAX, SC_AVG}) run_case("allreduce", dt, op, SC_ALGO_FLAT, ll_max / DT_SIZE[dt] - 5, 1, 0);
      SC(sc_comm_set_option(c.comm, "ll_threads", ll_thr));
      SC(sc_comm_set_option(c.comm, "lamport_threads", lam_thr));
      c.log("LL shapes (lamport %d) done: %d passed, %d failed so far", lamport, c.passes, c.fails);
    }
  }
  SC(sc_comm_set_option(c.comm, "lamport_max_bytes", lam_max));

  // Lamport's EMPTY word (all ones) as input data: a NaN for fp32 / bf16 / fp16. It must not be taken
  // for "not arrived yet" (that would hang until the timeout) and must come out as a NaN; the other
  // elements are exact sums of small integers.
  for (int dt : {SC_FLOAT32, SC_BFLOAT16, SC_FLOAT16}) {
    const size_t es = DT_SIZE[dt], cnt = 4099;
    // all-ones 32-bit words: for 16-bit types both elements of a pair (the only way to form one),
    // and one whole 16-byte unit of them
    auto nan_at = [&](size_t i) { const size_t w = i * es / 4; return w % 7 == 0 || (w >= 40 && w < 44); };
    std::vector<unsigned char> h(cnt * es), o(cnt * es);
    for (size_t i = 0; i < cnt; ++i) {
      if (nan_at(i)) memset(&h[i * es], 0xFF, es);
      else if (dt == SC_FLOAT32) { const float v = (float)(r + 1); memcpy(&h[i * es], &v, 4); }
      else { const uint16_t v = dt == SC_BFLOAT16 ? f2bf((float)(r + 1)) : f2h((float)(r + 1)); memcpy(&h[i * es], &v, 2); }
    }
    dsend.ensure(cnt * es);
    drecv.ensure(cnt * es);
    SC(sc_memcpy_htod(dsend.p, h.data(), cnt * es, nullptr));
    SC(sc_memset(drecv.p, 0, cnt * es, nullptr));
    SC(sc_allreduce(c.comm, dsend.p, drecv.p, cnt, dt, SC_SUM, 1.0, SC_ALGO_FLAT, c.stream));
    SC(sc_stream_synchronize(c.stream));
    if (sc_comm_check(c.comm) != SC_OK) die("EMPTY-word input %s: device error: %s", DT_NAME[dt], sc_last_error());
    SC(sc_memcpy_dtoh(o.data(), drecv.p, cnt * es, nullptr));
    size_t bad = 0;
    const double want = n * (n + 1) / 2.0;
    for (size_t i = 0; i < cnt; ++i) {
      const double v = getf(o.data(), dt, i);
      if (nan_at(i) ? !std::isnan(v) : v != want) ++bad;
    }
    if (bad) c.fail("EMPTY-word input %s: %zu wrong element(s)", DT_NAME[dt], bad);
    else ++c.passes;
  }

  // Error paths: LP on fp16 (LP takes fp32 / bf16) and PREMUL on ints.
  if (sc_allreduce(c.comm, dsend.p, drecv.p, 16, SC_FLOAT16, SC_SUM, 1.0, SC_ALGO_LP, c.stream) != SC_ERR_UNSUPPORTED)
    c.fail("algo LP on fp16 should return SC_ERR_UNSUPPORTED");
  else ++c.passes;
  if (sc_allreduce(c.comm, dsend.p, drecv.p, 16, SC_INT32, SC_PREMUL_SUM, 1.0, SC_ALGO_FLAT, c.stream) != SC_ERR_UNSUPPORTED)
    c.fail("PREMUL_SUM on int32 should return SC_ERR_UNSUPPORTED");
  else ++c.passes;

  // Barriers back to back.
  for (int i = 0; i < 200; ++i) SC(sc_barrier(c.comm, c.stream));
  SC(sc_stream_synchronize(c.stream));
  if (sc_comm_check(c.comm) != SC_OK) c.fail("200 barriers: %s", sc_last_error());
  else ++c.passes;

  // 1000 back-to-back mixed-size allreduces (fp32 SUM of small integers: exact), one sync. A quarter
  // run FLAT with Lamport off (LL up to its limit), so Lamport and LL one-shots alternate in one stream.
  {
    const int NOPS = 1000;
    uint64_t s = c.seed ^ 0xABCDEFull;  // same sequence on every rank
    std::vector<size_t> cnt(NOPS), soff(NOPS), roff(NOPS);
    std::vector<int> alg(NOPS);
    const size_t pool = 4u << 20;  // send pool elements
    size_t rtot = 0;
    for (int i = 0; i < NOPS; ++i) {
      const int kind = (int)(splitmix(s) % 4);
      cnt[i] = kind == 0 ? 1 + splitmix(s) % 64 : kind == 1 ? 1 + splitmix(s) % 4096 : kind == 2 ? 1 + splitmix(s) % 100000 : 1 + splitmix(s) % 1500000;
      soff[i] = splitmix(s) % (pool - cnt[i]);
      roff[i] = rtot;
      rtot += cnt[i] + (splitmix(s) % 5);
      alg[i] = (int)(splitmix(s) % 4);  // auto, flat, tree, 3: flat with Lamport off
    }
    std::vector<std::vector<float>> pin(n, std::vector<float>(pool));
    for (int q = 0; q < n; ++q) {
      uint64_t t = c.seed * 31 + (uint64_t)q;
      for (size_t k = 0; k < pool; ++k) pin[q][k] = (float)((int)(splitmix(t) % 201) - 100);
    }
    DevBuf ps, pr;
    ps.ensure(pool * 4);
    pr.ensure(rtot * 4);
    SC(sc_memcpy_htod(ps.p, pin[r].data(), pool * 4, nullptr));
    SC(sc_memset(pr.p, 0xFF, rtot * 4, nullptr));
    SC(sc_device_synchronize());
    const double t1 = now_s();
    for (int i = 0; i < NOPS; ++i) {
      if (alg[i] == 3) SC(sc_comm_set_option(c.comm, "lamport_max_bytes", 0));
      SC(sc_allreduce(c.comm, (float*)ps.p + soff[i], (float*)pr.p + roff[i], cnt[i], SC_FLOAT32, SC_SUM, 1.0,
                      alg[i] == 3 ? SC_ALGO_FLAT : alg[i], c.stream));
      if (alg[i] == 3) SC(sc_comm_set_option(c.comm, "lamport_max_bytes", lam_max));
    }
    SC(sc_stream_synchronize(c.stream));
    const double t2 = now_s();
    if (sc_comm_check(c.comm) != SC_OK) die("mixed allreduces: %s", sc_last_error());
    std::vector<float> res(rtot);
    SC(sc_memcpy_dtoh(res.data(), pr.p, rtot * 4, nullptr));
    size_t bad = 0, total = 0;
    for (int i = 0; i < NOPS; ++i) {
      for (size_t k = 0; k < cnt[i]; ++k) {
        float e = 0;
        for (int q = 0; q < n; ++q) e += pin[q][soff[i] + k];
        if (res[roff[i] + k] != e) {
          if (bad < 4) printf("[%s r%d] mixed op %d (%zu elems, algo %s) element %zu: %g expected %g\n", c.mode, r, i, cnt[i],
                              alg[i] == 3 ? "flat-ll" : ALGO_NAME[alg[i]], k, res[roff[i] + k], e);
          ++bad;
        }
      }
      total += cnt[i];
    }
    if (bad) c.fail("1000 mixed allreduces: %zu of %zu elements wrong", bad, total);
    else {
      ++c.passes;
      c.log("1000 back-to-back mixed allreduces OK (%zu elements, %.1f ms)", total, (t2 - t1) * 1e3);
    }
  }

  // Bit-identical allreduce outputs on every rank.
  {
    const size_t nh = c.hashes.size();
    std::vector<uint64_t> all(nh * n);
    c.ex.allgather(c.hashes.data(), nh * 8, all.data());
    size_t diff = 0;
    for (size_t k = 0; k < nh; ++k)
      for (int q = 0; q < n; ++q)
        if (all[(size_t)q * nh + k] != c.hashes[k]) {
          if (diff < 4) c.fail("rank %d output differs from rank %d: %s", q, r, c.case_names[k].c_str());
          ++diff;
        }
    if (!diff) {
      ++c.passes;
      c.log("allreduce outputs bit-identical on all %d ranks (%zu cases)", n, nh);
    }
  }
}

// Timeout and abort: kernels must return with an error instead of hanging.
static void run_fault_tests(Ctx& c) {
  const size_t blen = sc_comm_export_size();
  for (int variant = 0; variant < 2; ++variant) {
    sc_comm_t t = nullptr;
    SC(sc_comm_create(c.rank, c.n, c.device, 1 << 20, variant == 0 ? 1.5 : 60.0, &t));
    std::vector<unsigned char> mine(blen), all(blen * c.n);
    SC(sc_comm_export(t, mine.data(), blen));
    c.ex.allgather(mine.data(), blen, all.data());
    SC(sc_comm_connect(t, all.data(), blen));
    c.ex.barrier();
    if (c.rank == 0) {
      const double t0 = now_s();
      SC(sc_barrier(t, c.stream));  // rank 1 never joins
      if (variant == 1) {
        usleep(300000);
        SC(sc_comm_abort(t));
      }
      SC(sc_stream_synchronize(c.stream));
      const double dt = now_s() - t0;
      int rc = sc_comm_check(t);
      const int want = variant == 0 ? SC_ERR_TIMEOUT : SC_ERR_ABORTED;
      if (rc != want) c.fail("%s test: sc_comm_check returned %s", variant ? "abort" : "timeout", sc_status_name(rc));
      else {
        ++c.passes;
        c.log("%s test OK after %.2f s: %s", variant ? "abort" : "timeout", dt, sc_last_error());
      }
    }
    c.ex.barrier();
    if (c.rank != 0) SC(sc_comm_abort(t));
    sc_comm_destroy(t);
    c.ex.barrier();
  }
}

// ------------------------------------------------------------------------------------------
// benchmark
// ------------------------------------------------------------------------------------------
struct BenchRow {
  size_t bytes;
  int dt;
  double ll_us, flat_us, tree_us, auto_us, nccl_us;
};

static double comm_timeout = 120.0;
static void run_bench(Ctx& c, size_t max_bytes, int iters, bool sweep, bool sweep_blocks, std::vector<BenchRow>& rows) {
  const int n = c.n;
  DevBuf s, rb;
  s.ensure(max_bytes);
  rb.ensure(max_bytes);
  {
    std::vector<unsigned char> h(std::min(max_bytes, (size_t)64 << 20));
    uint64_t t = c.seed + c.rank;
    for (size_t i = 0; i < h.size(); i += 2) {
      uint16_t v = f2bf((float)(urand(t) - 0.5));
      memcpy(&h[i], &v, 2);
    }
    for (size_t off = 0; off < max_bytes; off += h.size())
      SC(sc_memcpy_htod((char*)s.p + off, h.data(), std::min(h.size(), max_bytes - off), nullptr));
  }
  void *e0, *e1;
  SC(sc_event_create(&e0));
  SC(sc_event_create(&e1));
  const long long d_blocks = option(c.comm, "max_blocks");
  auto set_ll = [&](long long v) { SC(sc_comm_set_option(c.comm, "ll_max_bytes", v)); };
  // the settings in effect, restored after the sweeps
  const long long d_ll = option(c.comm, "ll_max_bytes"), d_llt = option(c.comm, "ll_threads");
  const long long d_lamt = option(c.comm, "lamport_threads"), d_lam = option(c.comm, "lamport_max_bytes");
  auto time_one = [&](size_t bytes, int dt, int algo) -> double {
    const size_t count = bytes / DT_SIZE[dt];
    const int warm = 10;
    const int it = bytes >= (256u << 20) ? std::max(iters / 2, 20) : iters;
    for (int i = 0; i < warm; ++i) SC(sc_allreduce(c.comm, s.p, rb.p, count, dt, SC_SUM, 1.0, algo, c.stream));
    SC(sc_stream_synchronize(c.stream));
    c.ex.barrier();
    // Line the ranks up on the device, then hold the stream while the host queues the loop.
    SC(sc_barrier(c.comm, c.stream));
    SC(sc_stream_delay(c.stream, 2000.0));
    SC(sc_event_record(e0, c.stream));
    for (int i = 0; i < it; ++i) SC(sc_allreduce(c.comm, s.p, rb.p, count, dt, SC_SUM, 1.0, algo, c.stream));
    SC(sc_event_record(e1, c.stream));
    SC(sc_event_synchronize(e1));
    if (sc_comm_check(c.comm) != SC_OK) die("bench: %s", sc_last_error());
    float ms = 0;
    SC(sc_event_elapsed_ms(e0, e1, &ms));
    double us = ms * 1e3 / it;
    double all[8];
    c.ex.allgather(&us, sizeof(double), all);
    double mx = 0;
    for (int q = 0; q < n; ++q) mx = std::max(mx, all[q]);
    return mx;  // slowest rank
  };
  if (sweep) {  // LL block size x block cap at latency sizes, against barrier-flat (fp32, then bf16)
    const size_t sizes[] = {(size_t)1 << 10, (size_t)4 << 10, (size_t)8 << 10, (size_t)16 << 10, (size_t)32 << 10, (size_t)64 << 10,
                            (size_t)128 << 10, (size_t)256 << 10, (size_t)512 << 10};
    for (int dt : {SC_FLOAT32, SC_BFLOAT16}) {
      const char* dn = dt == SC_FLOAT32 ? "fp32" : "bf16";
      for (size_t bytes : sizes) {
        if (bytes > max_bytes) continue;
        set_ll(0);
        SC(sc_comm_set_option(c.comm, "lamport_max_bytes", 0));
        SC(sc_comm_set_option(c.comm, "max_blocks", d_blocks));
        const double tf = time_one(bytes, dt, SC_ALGO_FLAT);
        if (c.rank == 0) printf("[sweep] %s %7zu B barrier-flat               %8.2f us\n", dn, bytes, tf);
        set_ll(1ll << 40);
        for (int lamport : {0, 1}) {
          SC(sc_comm_set_option(c.comm, "lamport_max_bytes", lamport ? 1ll << 40 : 0));
          for (int th : {64, 128, 256, 512}) {
            for (int mb : {128, 256}) {
              SC(sc_comm_set_option(c.comm, lamport ? "lamport_threads" : "ll_threads", th));
              SC(sc_comm_set_option(c.comm, "max_blocks", mb));
              const double t = time_one(bytes, dt, SC_ALGO_FLAT);
              if (c.rank == 0)
                printf("[sweep] %s %7zu B %s threads %3d blocks %3d %8.2f us\n", dn, bytes, lamport ? "lamport" : "ll     ", th, mb, t);
            }
          }
        }
        SC(sc_comm_set_option(c.comm, "lamport_max_bytes", d_lam));
      }
    }
    SC(sc_comm_set_option(c.comm, "ll_threads", d_llt));
    SC(sc_comm_set_option(c.comm, "lamport_threads", d_lamt));
    SC(sc_comm_set_option(c.comm, "max_blocks", d_blocks));
    set_ll(d_ll);
  }
  if (sweep_blocks) {
    set_ll(0);
    for (size_t bytes : {(size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20}) {
      if (bytes > max_bytes) continue;
      for (int mb : {32, 64, 128, 192, 256}) {
        SC(sc_comm_set_option(c.comm, "max_blocks", mb));
        double tf = bytes <= ((size_t)16 << 20) ? time_one(bytes, SC_FLOAT32, SC_ALGO_FLAT) : 0;
        double tt = time_one(bytes, SC_FLOAT32, SC_ALGO_TREE);
        if (c.rank == 0) printf("[sweep] fp32 %9zu B max_blocks %3d: flat %9.2f us  tree %9.2f us\n", bytes, mb, tf, tt);
      }
    }
    set_ll(1ll << 40);
    for (size_t bytes : {(size_t)8 << 10, (size_t)64 << 10, (size_t)256 << 10, (size_t)1 << 20}) {
      for (int mb : {16, 32, 64, 128, 256}) {
        SC(sc_comm_set_option(c.comm, "max_blocks", mb));
        double tl = time_one(bytes, SC_FLOAT32, SC_ALGO_FLAT);
        if (c.rank == 0) printf("[sweep] fp32 %9zu B max_blocks %3d: ll %9.2f us\n", bytes, mb, tl);
      }
    }
    SC(sc_comm_set_option(c.comm, "max_blocks", d_blocks));
    set_ll(d_ll);
  }
  for (int dt : {SC_FLOAT32, SC_BFLOAT16}) {
    for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 2) {
      BenchRow row{bytes, dt, 0, 0, 0, 0, 0};
      if (bytes <= ((size_t)4 << 20)) {
        set_ll(1ll << 40);
        row.ll_us = time_one(bytes, dt, SC_ALGO_FLAT);
      }
      set_ll(0);
      row.flat_us = time_one(bytes, dt, SC_ALGO_FLAT);
      set_ll(d_ll);
      row.tree_us = time_one(bytes, dt, SC_ALGO_TREE);
      row.auto_us = time_one(bytes, dt, SC_ALGO_AUTO);
      row.nccl_us = c.vendor ? time_one(bytes, dt, SC_ALGO_VENDOR) : 0;
      rows.push_back(row);
      if (c.rank == 0) {
        printf("[bench] %-5s %10zu B  ll %8.2f  flat %9.2f  tree %9.2f  auto %9.2f  nccl %9.2f us\n", DT_NAME[dt], bytes,
               row.ll_us, row.flat_us, row.tree_us, row.auto_us, row.nccl_us);
        fflush(stdout);
      }
    }
  }
  sc_event_destroy(e0);
  sc_event_destroy(e1);
}

// LP allreduce vs NCCL (and DDA tree) with the error of each LP size on N(0,1) data.
static std::string human(size_t b) {
  char buf[32];
  if (b >= (1u << 30)) snprintf(buf, sizeof(buf), "%zu GB", b >> 30);
  else if (b >= (1u << 20)) snprintf(buf, sizeof(buf), "%zu MB", b >> 20);
  else if (b >= 1024) snprintf(buf, sizeof(buf), "%zu KB", b >> 10);
  else snprintf(buf, sizeof(buf), "%zu B", b);
  return buf;
}

// LP allreduce benchmark: one-shot and two-shot LP (two CTA caps for the one-shot), DDA tree and
// NCCL, 1 MB .. max_bytes, fp32 and bf16, N(0,1) data; error columns: relative L2 error of the
// LP output (first <= 16M elements) against a float64 sum of every rank's input.
static void run_lp_bench(Ctx& c, size_t max_bytes, int iters, const char* sweep, bool trace) {
  DevBuf s, rb;
  s.ensure(max_bytes);
  rb.ensure(max_bytes);
  void *e0, *e1;
  SC(sc_event_create(&e0));
  SC(sc_event_create(&e1));
  const size_t pat = std::min(max_bytes / 4, (size_t)16 << 20);  // pattern length (elements), tiled
  std::vector<std::vector<float>> in(c.n);  // every rank's input pattern, as the device sees it
  auto time_one = [&](size_t bytes, int dt, int algo) -> double {
    const size_t count = bytes / DT_SIZE[dt];
    const int it = bytes >= (256u << 20) ? std::max(iters / 4, 10) : iters;
    for (int i = 0; i < 5; ++i) SC(sc_allreduce(c.comm, s.p, rb.p, count, dt, SC_SUM, 1.0, algo, c.stream));
    SC(sc_stream_synchronize(c.stream));
    c.ex.barrier();
    SC(sc_barrier(c.comm, c.stream));
    SC(sc_stream_delay(c.stream, 2000.0));
    SC(sc_event_record(e0, c.stream));
    for (int i = 0; i < it; ++i) SC(sc_allreduce(c.comm, s.p, rb.p, count, dt, SC_SUM, 1.0, algo, c.stream));
    SC(sc_event_record(e1, c.stream));
    SC(sc_event_synchronize(e1));
    if (sc_comm_check(c.comm) != SC_OK) die("lp bench: %s", sc_last_error());
    float ms = 0;
    SC(sc_event_elapsed_ms(e0, e1, &ms));
    double us = ms * 1e3 / it, all[8], mx = 0;
    c.ex.allgather(&us, sizeof(double), all);
    for (int q = 0; q < c.n; ++q) mx = std::max(mx, all[q]);
    return mx;
  };
  // relative L2 error of rb (the last call's output) over its first min(count, pat) elements
  auto err_of = [&](size_t bytes, int dt) -> double {
    const size_t m = std::min(bytes / DT_SIZE[dt], pat);
    std::vector<unsigned char> out(m * DT_SIZE[dt]);
    SC(sc_memcpy_dtoh(out.data(), rb.p, out.size(), nullptr));
    double num = 0, den = 0;
    for (size_t i = 0; i < m; ++i) {
      double ref = 0;
      for (int q = 0; q < c.n; ++q) ref += in[q][i];
      float g;
      if (dt == SC_FLOAT32) memcpy(&g, &out[4 * i], 4);
      else { uint16_t b; memcpy(&b, &out[2 * i], 2); g = bf2f(b); }
      num += (g - ref) * (g - ref);
      den += ref * ref;
    }
    return den > 0 ? sqrt(num / den) : 0;
  };
  // every rank's N(0,1) pattern as the device sees it (bf16-rounded for bf16) into in[], this rank's tiled into s
  auto load_inputs = [&](int dt) {
    for (int q = 0; q < c.n; ++q) {
      std::vector<float> v(pat);
      uint64_t t = c.seed + 77 * (q + 1);
      for (auto& x : v) x = (float)nrand(t);
      std::vector<unsigned char> b;
      lp_pack(v, dt, b, in[q]);
      if (q == c.rank)
        for (size_t off = 0; off < max_bytes; off += b.size())
          SC(sc_memcpy_htod((char*)s.p + off, b.data(), std::min(b.size(), max_bytes - off), nullptr));
    }
  };
  if (trace) {  // --lp-trace: GPU timeline of the one-shot's chunk kernels (sc_debug_lp_trace), fp32
    const size_t ops = 256;
    std::vector<uint64_t> t(ops * 8);
    SC(sc_comm_set_option(c.comm, "lp_oneshot_max_ranks", 8));
    load_inputs(SC_FLOAT32);
    SC(sc_debug_lp_trace(c.comm, nullptr, ops));
    for (size_t bytes : {(size_t)16 << 20, (size_t)64 << 20, (size_t)128 << 20, (size_t)256 << 20, (size_t)1 << 30}) {
      if (bytes > max_bytes) continue;
      const size_t count = bytes / 4;
      const int calls = 4;
      for (int i = 0; i < 3; ++i) SC(sc_allreduce(c.comm, s.p, rb.p, count, SC_FLOAT32, SC_SUM, 1.0, SC_ALGO_LP, c.stream));
      SC(sc_stream_synchronize(c.stream));
      SC(sc_debug_lp_trace(c.comm, t.data(), ops));  // clears
      c.ex.barrier();
      SC(sc_barrier(c.comm, c.stream));
      SC(sc_stream_delay(c.stream, 2000.0));  // queue the calls back to back, as the benchmark does
      for (int i = 0; i < calls; ++i) SC(sc_allreduce(c.comm, s.p, rb.p, count, SC_FLOAT32, SC_SUM, 1.0, SC_ALGO_LP, c.stream));
      SC(sc_stream_synchronize(c.stream));
      if (sc_comm_check(c.comm) != SC_OK) die("lp trace: %s", sc_last_error());
      SC(sc_debug_lp_trace(c.comm, t.data(), ops));
      std::vector<size_t> used;
      for (size_t k = 0; k < ops; ++k)
        if (t[k * 8 + 7]) used.push_back(k);  // latest "done" set
      std::sort(used.begin(), used.end(), [&](size_t a, size_t b) { return t[a * 8] < t[b * 8]; });
      if (used.empty()) continue;
      const uint64_t t0 = t[used[0] * 8];
      auto us = [&](uint64_t v) { return v == ~0ull ? -1.0 : (double)(v - t0) / 1e3; };
      printf("[trace r%d] %s fp32, %d calls, %zu chunk kernels; us (HIP: wall-clock ticks / 1000) from the first kernel's first CTA start:\n", c.rank,
             human(bytes).c_str(), calls, used.size());
      for (size_t k : used) {
        const uint64_t* w = &t[k * 8];
        printf("[trace r%d]   start %8.1f..%8.1f  pushed %8.1f..%8.1f  synced %8.1f..%8.1f  done %8.1f..%8.1f\n", c.rank,
               us(w[0]), us(w[1]), us(w[2]), us(w[3]), us(w[4]), us(w[5]), us(w[6]), us(w[7]));
      }
      fflush(stdout);
      c.ex.barrier();
    }
    SC(sc_debug_lp_trace(c.comm, nullptr, 0));
    sc_event_destroy(e0);
    sc_event_destroy(e1);
    return;
  }
  if (sweep) {  // --lp-sweep: one column per option set ("k=v,k=v"; ';' between sets), 16 MB .. max, x2
    std::vector<std::vector<std::pair<std::string, long long>>> sets;
    std::string all = sweep;
    for (size_t a = 0; a <= all.size();) {
      size_t b = all.find(';', a);
      if (b == std::string::npos) b = all.size();
      std::vector<std::pair<std::string, long long>> set;
      const std::string one = all.substr(a, b - a);
      for (size_t x = 0; x < one.size();) {
        size_t y = one.find(',', x);
        if (y == std::string::npos) y = one.size();
        const std::string kv = one.substr(x, y - x);
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) die("--lp-sweep: '%s' is not opt=value", kv.c_str());
        set.emplace_back(kv.substr(0, eq), strtoll(kv.c_str() + eq + 1, nullptr, 10));
        x = y + 1;
      }
      if (!set.empty()) sets.push_back(set);
      a = b + 1;
    }
    if (c.rank == 0) {  // options persist from set to set: give each set every option it sweeps
      for (size_t i = 0; i < sets.size(); ++i) {
        printf("set %zu:", i);
        for (auto& kv : sets[i]) printf(" %s=%lld", kv.first.c_str(), kv.second);
        printf("\n");
      }
      printf("| size | dtype | nccl us |");
      for (size_t i = 0; i < sets.size(); ++i) printf(" set %zu us |", i);
      printf("\n|---:|---|---:|");
      for (size_t i = 0; i < sets.size(); ++i) printf("---:|");
      printf("\n");
    }
    if (max_bytes < ((size_t)16 << 20)) die("--lp-sweep times 16 MB and up: --bench-max %zu is smaller", max_bytes);
    SC(sc_comm_set_option(c.comm, "lp_oneshot_max_ranks", 8));
    for (int dt : {SC_FLOAT32, SC_BFLOAT16}) {
      load_inputs(dt);
      for (size_t bytes = (size_t)16 << 20; bytes <= max_bytes; bytes *= 2) {
        const double nccl = c.vendor ? time_one(bytes, dt, SC_ALGO_VENDOR) : 0;
        std::string row;
        char cell[64];
        for (auto& set : sets) {
          for (auto& kv : set) SC(sc_comm_set_option(c.comm, kv.first.c_str(), kv.second));
          const double us = time_one(bytes, dt, SC_ALGO_LP);
          snprintf(cell, sizeof(cell), " %.1f (%.2fx) |", us, nccl > 0 ? nccl / us : 0);
          row += cell;
        }
        if (c.rank == 0) printf("| %s | %s | %.1f |%s\n", human(bytes).c_str(), DT_NAME[dt], nccl, row.c_str());
        fflush(stdout);
      }
    }
    sc_event_destroy(e0);
    sc_event_destroy(e1);
    return;
  }
  if (c.rank == 0)
    printf("| size | dtype | lp 1-shot us | err | lp 1-shot 256 CTAs us | lp 2-shot us | err | tree us | nccl us | "
           "1-shot vs nccl | 2-shot vs nccl | 1-shot busbw GB/s |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int dt : {SC_FLOAT32, SC_BFLOAT16}) {
    load_inputs(dt);
    for (size_t bytes = (size_t)1 << 20; bytes <= max_bytes; bytes *= 4) {
      SC(sc_comm_set_option(c.comm, "lp_oneshot_max_ranks", 8));
      const double lp1 = time_one(bytes, dt, SC_ALGO_LP);
      const double err1 = err_of(bytes, dt);
      SC(sc_comm_set_option(c.comm, "lp_max_blocks", 256));
      const double lp1b = time_one(bytes, dt, SC_ALGO_LP);
      SC(sc_comm_set_option(c.comm, "lp_max_blocks", 0));
      SC(sc_comm_set_option(c.comm, "lp_oneshot_max_ranks", 1));
      const double lp2 = time_one(bytes, dt, SC_ALGO_LP);
      const double err2 = err_of(bytes, dt);
      SC(sc_comm_set_option(c.comm, "lp_oneshot_max_ranks", 2));
      const double tree = time_one(bytes, dt, SC_ALGO_TREE);
      const double nccl = c.vendor ? time_one(bytes, dt, SC_ALGO_VENDOR) : 0;
      if (c.rank == 0)
        printf("| %s | %s | %.1f | %.4f | %.1f | %.1f | %.4f | %.1f | %.1f | %.2fx | %.2fx | %.1f |\n", human(bytes).c_str(),
               DT_NAME[dt], lp1, err1, lp1b, lp2, err2, tree, nccl, nccl > 0 ? nccl / lp1 : 0, nccl > 0 ? nccl / lp2 : 0,
               bytes / (lp1 * 1e-6) / 1e9 * 2.0 * (c.n - 1) / c.n);
      fflush(stdout);
    }
  }
  sc_event_destroy(e0);
  sc_event_destroy(e1);
}


static void print_bench(const std::vector<BenchRow>& rows, int n, const char* md_path, const char* csv_path) {
  std::string md;
  char line[512];
  md += "| size | dtype | algo | time_us | algbw_GBps | busbw_GBps | nccl_time_us | speedup | flat_ll_us | flat_us | tree_us | auto_us | auto_speedup |\n";
  md += "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::string csv = "bytes,dtype,best_algo,time_us,algbw_GBps,busbw_GBps,nccl_time_us,speedup,flat_ll_us,flat_us,tree_us,auto_us,auto_speedup\n";
  for (const BenchRow& r : rows) {
    double best = r.flat_us;
    const char* an = "flat";
    if (r.ll_us > 0 && r.ll_us < best) { best = r.ll_us; an = "flat-ll"; }
    if (r.tree_us < best) { best = r.tree_us; an = "tree"; }
    const double algbw = r.bytes / (best * 1e-6) / 1e9;
    const double busbw = algbw * 2.0 * (n - 1) / n;
    const double sp = r.nccl_us > 0 ? r.nccl_us / best : 0;
    const double asp = r.nccl_us > 0 ? r.nccl_us / r.auto_us : 0;
    snprintf(line, sizeof(line), "| %s | %s | %s | %.2f | %.1f | %.1f | %.2f | %.2fx | %.2f | %.2f | %.2f | %.2f | %.2fx |\n",
             human(r.bytes).c_str(), DT_NAME[r.dt], an, best, algbw, busbw, r.nccl_us, sp,
             r.ll_us, r.flat_us, r.tree_us, r.auto_us, asp);
    md += line;
    snprintf(line, sizeof(line), "%zu,%s,%s,%.3f,%.2f,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", r.bytes, DT_NAME[r.dt],
             an, best, algbw, busbw, r.nccl_us, sp, r.ll_us, r.flat_us, r.tree_us, r.auto_us, asp);
    csv += line;
  }
  printf("\n%s\n", md.c_str());
  if (md_path) {
    FILE* f = fopen(md_path, "w");
    if (f) {
      fputs(md.c_str(), f);
      fclose(f);
    }
  }
  if (csv_path) {
    FILE* f = fopen(csv_path, "w");
    if (f) {
      fputs(csv.c_str(), f);
      fclose(f);
    }
  }
}

// ------------------------------------------------------------------------------------------
// rank driver
// ------------------------------------------------------------------------------------------
struct Options {
  int nranks = 2;
  uint64_t seed = 0;
  bool mp = true, sp = true, bench = true, correctness = true, verbose = false, sweep = false, sweep_blocks = false;
  bool lp = false, lp_only = false, lp_big = false, lp_bench = false;
  const char* lp_sweep = nullptr;
  bool lp_trace = false;
  bool a2av = false, a2av_only = false, a2av_bench = false;
  bool mismatch_only = false;
  const char* a2av_csv = nullptr;
  bool vclose = false;
  int vclose_rounds = 20, vclose_comms = 3;
  bool vclose_a2av = false;
  size_t bench_max = (size_t)1 << 30;
  int iters = 100;
  const char* md = nullptr;
  const char* csv = nullptr;
};

static int rank_main(int rank, const char* mode, const std::string& dir, const Options& o, bool do_bench) {
  Ctx c;
  c.rank = rank;
  c.n = o.nranks;
  c.mode = mode;
  c.ex.dir = dir;
  c.ex.rank = rank;
  c.ex.n = o.nranks;
  c.seed = o.seed;
  c.verbose = o.verbose;
  int ndev = 0;
  SC(sc_device_count(&ndev));
  c.device = rank % ndev;
  SC(sc_set_device(c.device));
  char info[512];
  SC(sc_runtime_info(info, sizeof(info)));
  c.log("%s; rank %d on device %d", info, rank, c.device);
  SC(sc_stream_create(&c.stream));
  c.vendor = sc_vendor_available() == 1 && ndev >= c.n;
  if (ndev < c.n) c.log("vendor library not used: %d ranks share %d GPUs (it takes one rank per GPU)", c.n, ndev);
  else if (!c.vendor) c.log("vendor library unavailable: %s", sc_last_error());
  else {
    int v = 0;
    SC(sc_vendor_version(&v));
    c.log("vendor library version %d", v);
  }

  const size_t staging = (size_t)8 << 20;  // small, so that big counts exercise chunking
  const size_t blen = sc_comm_export_size();
  auto make_comm = [&](size_t stg) {
    sc_comm_t cm = nullptr;
    SC(sc_comm_create(rank, c.n, c.device, stg, comm_timeout, &cm));
    std::vector<unsigned char> mine(blen), all(blen * c.n);
    SC(sc_comm_export(cm, mine.data(), blen));
    c.ex.allgather(mine.data(), blen, all.data());
    const double t0 = now_s();
    SC(sc_comm_connect(cm, all.data(), blen));
    c.log("connected (staging %zu bytes) in %.1f ms", stg, (now_s() - t0) * 1e3);
    if (c.vendor) {
      std::vector<unsigned char> id(sc_vendor_unique_id_size()), ids(id.size() * c.n);
      if (rank == 0) SC(sc_vendor_unique_id(id.data(), (int)id.size()));
      c.ex.allgather(id.data(), id.size(), ids.data());
      SC(sc_vendor_comm_init(cm, ids.data()));
    }
    return cm;
  };

  if (o.lp) {
    // Kernel settings (from each rank's environment, or set before the export) must agree: rank 1
    // picks another LL threshold, and connect must refuse on every rank, naming the setting. (Set as
    // an option, not with setenv: in --sp mode the ranks are threads of one process.)
    {
      sc_comm_t cm = nullptr;
      SC(sc_comm_create(rank, c.n, c.device, staging, comm_timeout, &cm));
      if (rank == 1) SC(sc_comm_set_option(cm, "ll_max_bytes", 4096));
      std::vector<unsigned char> mine(blen), all(blen * c.n);
      SC(sc_comm_export(cm, mine.data(), blen));
      c.ex.allgather(mine.data(), blen, all.data());
      const int rc = sc_comm_connect(cm, all.data(), blen);
      const std::string msg = rc == SC_OK ? "" : sc_last_error();
      if (rc == SC_ERR_INVALID_ARG && msg.find("ll_max_bytes") != std::string::npos) ++c.passes;
      else c.fail("settings mismatch: connect returned %d (%s), expected SC_ERR_INVALID_ARG naming ll_max_bytes", rc, msg.c_str());
      SC(sc_comm_destroy(cm));
    }
    c.comm = make_comm(staging);
    if (ndev < c.n) SC(sc_comm_set_option(c.comm, "max_blocks", 32));  // ranks share a GPU: stay co-resident
    if (rank == 0) run_lp_codec(c);
    run_lp_collectives(c, o.lp_big);
    SC(sc_comm_destroy(c.comm));
    c.comm = nullptr;
    c.log("lp: %d passed, %d failed", c.passes, c.fails);
  }
  if (o.a2av) {
    c.comm = make_comm(staging);
    run_a2av_tests(c, staging);
    SC(sc_comm_destroy(c.comm));
    c.comm = nullptr;
    c.log("alltoallv: %d passed, %d failed", c.passes, c.fails);
  }
  if (o.a2av_bench && do_bench) {
    c.comm = make_comm(0);
    run_a2av_bench(c, o.iters, o.a2av_csv);
    SC(sc_comm_destroy(c.comm));
    c.comm = nullptr;
  }
  if (o.a2av_only) {
    SC(sc_stream_destroy(c.stream));
    return c.fails ? 1 : 0;
  }
  if (o.mismatch_only) {
    run_forged_blob_tests(c, staging);
    run_mismatch_tests(c, staging);
    c.log("mismatch: %d passed, %d failed", c.passes, c.fails);
    SC(sc_stream_destroy(c.stream));
    return c.fails ? 1 : 0;
  }
  if (o.correctness && !o.lp_only) {
    c.comm = make_comm(staging);
    run_correctness(c, staging);
    run_fault_tests(c);
    run_forged_blob_tests(c, staging);
    run_mismatch_tests(c, staging);
    SC(sc_comm_destroy(c.comm));
    c.comm = nullptr;
    c.log("correctness: %d passed, %d failed (%d allReduce cases of them also matched the fp32 rank-order bits)",
          c.passes, c.fails, c.exact_cases);
  }
  if (do_bench) {
    c.comm = make_comm(0);
    c.log("bench: flat_max=%lld tree_max=%lld max_blocks=%lld", option(c.comm, "flat_max_bytes"),
          option(c.comm, "tree_max_bytes"), option(c.comm, "max_blocks"));
    std::vector<BenchRow> rows;
    if (!o.lp_bench) run_bench(c, o.bench_max, o.iters, o.sweep, o.sweep_blocks, rows);
    else run_lp_bench(c, o.bench_max, o.iters, o.lp_sweep, o.lp_trace);
    if (rank == 0 && !o.lp_bench) print_bench(rows, c.n, o.md, o.csv);
    SC(sc_comm_destroy(c.comm));
  }
  SC(sc_stream_destroy(c.stream));
  return c.fails ? 1 : 0;
}

static std::string make_dir() {
  char tmpl[] = "/tmp/sc_gpu_test_XXXXXX";
  if (!mkdtemp(tmpl)) die("mkdtemp: %s", strerror(errno));
  chmod(tmpl, 0700);
  return tmpl;
}
static void rm_dir(const std::string& d) {
  std::string cmd = "rm -rf '" + d + "'";
  if (system(cmd.c_str()) != 0) fprintf(stderr, "warning: could not remove %s\n", d.c_str());
}

// ------------------------------------------------------------------------------------------
// vclose: vendor communicators of several ranks in one process, closed at the same moment.
// Regression test for the SIGSEGV inside ncclCommDestroy when two rank threads of one process
// closed their vendor communicators concurrently, and for the hang (then illegal memory access) when
// each rank closed several such communicators in a row (both seen on 2x H200 with NCCL 2.28; the
// teardown order in vendor.cu answers them).
// ------------------------------------------------------------------------------------------
struct SpinBarrier {  // releases its n threads within microseconds of each other
  explicit SpinBarrier(int n_) : n(n_) {}
  void wait() {
    const int g = gen.load(std::memory_order_acquire);
    if (count.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
      count.store(0, std::memory_order_relaxed);
      gen.fetch_add(1, std::memory_order_release);
    } else {
      while (gen.load(std::memory_order_acquire) == g) std::this_thread::yield();
    }
  }
  const int n;
  std::atomic<int> count{0}, gen{0};
};

// One rank: per round, o.vclose_comms communicators with vendor communicators alive at once (as the
// Java suite keeps one per algorithm), each used for vendor allreduces (SUM and PREMUL_SUM),
// allgather, reducescatter and broadcast (and, with --vclose-a2av, a vendor allToAllV: grouped
// send/recv), then all closed, every rank at the same moment.
static int vclose_rank(int rank, const Options& o, const std::string& dir, SpinBarrier& sb) {
  const int n = o.nranks, K = o.vclose_comms;
  Exchanger ex;
  ex.dir = dir;
  ex.rank = rank;
  ex.n = n;
  int ndev = 0;
  SC(sc_device_count(&ndev));
  const int dev = rank % ndev;
  SC(sc_set_device(dev));
  void* stream = nullptr;
  SC(sc_stream_create(&stream));
  const size_t blen = sc_comm_export_size();
  const int idlen = sc_vendor_unique_id_size();
  const size_t maxc = (1u << 18) + 5;
  DevBuf sb_, rb_, cnt_;
  sb_.ensure(maxc * 4);
  rb_.ensure(maxc * 4);
  cnt_.ensure(2 * 8 * (size_t)n);
  std::vector<float> in(maxc), out(maxc);
  const float tri = (float)(n * (n + 1) / 2);
  int fails = 0;
  auto step = [&](int round, int j, const char* what) {  // progress, with -v
    if (o.verbose) printf("[vclose r%d] round %d comm %d: %s\n", rank, round, j, what);
  };
  auto check = [&](const char* what, int round, size_t cnt, const std::function<float(size_t)>& want) {
    size_t bad = 0;
    for (size_t i = 0; i < cnt; ++i)
      if (out[i] != want(i)) {
        if (bad < 3) printf("[vclose r%d] round %d: %s: element %zu = %g, expected %g\n", rank, round, what, i, out[i], want(i));
        ++bad;
      }
    if (bad) {
      printf("[vclose r%d] FAIL round %d: %s of %zu elements: %zu wrong\n", rank, round, what, cnt, bad);
      ++fails;
    }
  };
  for (int round = 0; round < o.vclose_rounds; ++round) {
    std::vector<sc_comm_t> cms(K, nullptr);
    for (int j = 0; j < K; ++j) {
      step(round, j, "create, connect, vendor init");
      SC(sc_comm_create(rank, n, dev, 1 << 20, comm_timeout, &cms[j]));
      std::vector<unsigned char> mine(blen), all(blen * n);
      SC(sc_comm_export(cms[j], mine.data(), blen));
      ex.allgather(mine.data(), blen, all.data());
      SC(sc_comm_connect(cms[j], all.data(), blen));
      std::vector<unsigned char> id(idlen), ids((size_t)idlen * n);
      if (rank == 0) SC(sc_vendor_unique_id(id.data(), idlen));
      ex.allgather(id.data(), id.size(), ids.data());
      SC(sc_vendor_comm_init(cms[j], ids.data()));  // rank 0's id
    }
    int ops = 0;
    for (int j = 0; j < K; ++j) {
      sc_comm_t cm = cms[j];
      // allreduce SUM, then PREMUL_SUM by 0.5, of small integers: exact in fp32
      const size_t counts[] = {1, 1023, maxc};
      for (int k = 0; k < 3; ++k) {
        const size_t cnt = counts[k];
        const int sh = k + round + j;
        for (int premul = 0; premul < 2; ++premul) {
          step(round, j, premul ? "vendor allreduce PREMUL_SUM" : "vendor allreduce SUM");
          for (size_t i = 0; i < cnt; ++i) in[i] = (float)((rank + 1) * (premul ? 2 : 1) * (int)((i + sh) % 13));
          SC(sc_memcpy_htod(sb_.p, in.data(), cnt * 4, stream));
          SC(sc_allreduce(cm, sb_.p, rb_.p, cnt, SC_FLOAT32, premul ? SC_PREMUL_SUM : SC_SUM, 0.5, SC_ALGO_VENDOR, stream));
          SC(sc_memcpy_dtoh(out.data(), rb_.p, cnt * 4, stream));
          SC(sc_stream_synchronize(stream));
          check(premul ? "vendor allreduce PREMUL_SUM" : "vendor allreduce SUM", round, cnt,
                [&](size_t i) { return tri * (float)((i + sh) % 13); });
          ++ops;
        }
      }
      // allgather, reducescatter (SUM), broadcast (root j % n) through the vendor
      {
        const size_t cnt = 4097;
        step(round, j, "vendor allgather");
        for (size_t i = 0; i < cnt; ++i) in[i] = (float)(rank * 100000 + (int)i);
        SC(sc_memcpy_htod(sb_.p, in.data(), cnt * 4, stream));
        SC(sc_vendor_allgather(cm, sb_.p, rb_.p, cnt, SC_FLOAT32, stream));
        SC(sc_memcpy_dtoh(out.data(), rb_.p, cnt * n * 4, stream));
        SC(sc_stream_synchronize(stream));
        check("vendor allgather", round, cnt * n, [&](size_t i) { return (float)((int)(i / cnt) * 100000 + (int)(i % cnt)); });
        step(round, j, "vendor reducescatter");
        for (size_t i = 0; i < cnt * n; ++i) in[i] = (float)((rank + 1) * (int)(i % 11));
        SC(sc_memcpy_htod(sb_.p, in.data(), cnt * n * 4, stream));
        SC(sc_vendor_reducescatter(cm, sb_.p, rb_.p, cnt, SC_FLOAT32, SC_SUM, 1.0, stream));
        SC(sc_memcpy_dtoh(out.data(), rb_.p, cnt * 4, stream));
        SC(sc_stream_synchronize(stream));
        check("vendor reducescatter", round, cnt, [&](size_t i) { return tri * (float)(((size_t)rank * cnt + i) % 11); });
        step(round, j, "vendor broadcast");
        const int root = j % n;
        for (size_t i = 0; i < cnt; ++i) in[i] = (float)(rank * 7 + (int)(i % 5));
        SC(sc_memcpy_htod(sb_.p, in.data(), cnt * 4, stream));
        SC(sc_vendor_broadcast(cm, sb_.p, rb_.p, cnt, SC_FLOAT32, root, stream));
        SC(sc_memcpy_dtoh(out.data(), rb_.p, cnt * 4, stream));
        SC(sc_stream_synchronize(stream));
        check("vendor broadcast", round, cnt, [&](size_t i) { return (float)(root * 7 + (int)(i % 5)); });
        ops += 3;
      }
      SC(sc_comm_check(cm));
      if (!o.vclose_a2av) continue;
      // allToAllV through the vendor's grouped send/recv: rank r sends 100+r+p+j elements of value
      // 1000*r+p to rank p
      step(round, j, "vendor allToAllV");
      std::vector<int64_t> sc(n), rc(n, -1);
      size_t stot = 0, rtot = 0;
      for (int p = 0; p < n; ++p) {
        sc[p] = 100 + rank + p + j;
        for (int64_t e = 0; e < sc[p]; ++e) in[stot++] = (float)(1000 * rank + p);
        rtot += (size_t)(100 + p + rank + j);
      }
      SC(sc_memcpy_htod(sb_.p, in.data(), stot * 4, stream));
      SC(sc_memcpy_htod(cnt_.p, sc.data(), 8 * n, stream));
      SC(sc_vendor_alltoallv(cm, sb_.p, (const int64_t*)cnt_.p, rb_.p, maxc, (int64_t*)cnt_.p + n, SC_FLOAT32, stream));
      SC(sc_memcpy_dtoh(out.data(), rb_.p, rtot * 4, stream));
      SC(sc_memcpy_dtoh(rc.data(), (int64_t*)cnt_.p + n, 8 * n, stream));
      SC(sc_stream_synchronize(stream));
      std::vector<float> ref;
      for (int q = 0; q < n; ++q) {
        if (rc[q] != 100 + q + rank + j) {
          printf("[vclose r%d] FAIL round %d: vendor allToAllV: %lld elements from rank %d, expected %d\n", rank, round,
                 (long long)rc[q], q, 100 + q + rank + j);
          ++fails;
        }
        ref.insert(ref.end(), (size_t)(100 + q + rank + j), (float)(1000 * q + rank));
      }
      check("vendor allToAllV", round, rtot, [&](size_t i) { return ref[i]; });
      ++ops;
      SC(sc_comm_check(cm));
    }
    const bool abort_first = round % 4 == 3;
    sb.wait();  // every rank closes at the same moment, communicator by communicator
    const double t0 = now_s();
    for (int j = 0; j < K; ++j) {
      step(round, j, abort_first ? "abort, destroy" : "destroy");
      if (abort_first) {
        const int rc = sc_comm_abort(cms[j]);
        if (rc != SC_OK) {
          printf("[vclose r%d] FAIL round %d: sc_comm_abort(comm %d) -> %s: %s\n", rank, round, j, sc_status_name(rc),
                 sc_last_error());
          ++fails;
        }
      }
      const int rc = sc_comm_destroy(cms[j]);
      if (rc != SC_OK) {
        printf("[vclose r%d] FAIL round %d: sc_comm_destroy(comm %d) -> %s: %s\n", rank, round, j, sc_status_name(rc),
               sc_last_error());
        ++fails;
      }
    }
    const double dt = now_s() - t0;
    if (rank == 0 || o.verbose)
      printf("[vclose r%d] round %d: %d vendor calls on %d communicators checked; %s closed in %.1f ms\n", rank, round, ops,
             K, abort_first ? "aborted and" : "", dt * 1e3);
    sb.wait();  // all closed before the next round creates new communicators
  }
  SC(sc_stream_destroy(stream));
  return fails;
}

static int run_vclose(const Options& o) {
  if (sc_vendor_available() != 1) {
    printf("[vclose] FAILED: vendor library unavailable: %s\n", sc_last_error());
    return 1;
  }
  int v = 0, ndev = 0;
  SC(sc_vendor_version(&v));
  SC(sc_device_count(&ndev));
  if (ndev < o.nranks) {  // the vendor library does not take two ranks of one communicator on one GPU
    printf("[vclose] FAILED: needs %d GPUs (one per rank), %d visible\n", o.nranks, ndev);
    return 1;
  }
  printf("[vclose] %d ranks in one process (one thread and GPU each), vendor version %d, %d rounds of %d communicators\n",
         o.nranks, v, o.vclose_rounds, o.vclose_comms);
  std::string dir = make_dir();
  SpinBarrier sb(o.nranks);
  std::vector<std::thread> th;
  std::vector<int> rcs(o.nranks, 0);
  const double t0 = now_s();
  for (int r = 0; r < o.nranks; ++r) th.emplace_back([&, r] { rcs[r] = vclose_rank(r, o, dir, sb); });
  for (auto& t : th) t.join();
  rm_dir(dir);
  int f = 0;
  for (int r = 0; r < o.nranks; ++r) f += rcs[r];
  long long live[3] = {0, 0, 0};
  SC(sc_live_resources(live));
  if (live[0] != 0) {
    printf("[vclose] FAIL: %lld communicator(s) still live after all rounds\n", live[0]);
    ++f;
  }
  printf("[vclose] %s (%d rounds, %.1f s)\n", f ? "FAILED" : "all ranks passed", o.vclose_rounds, now_s() - t0);
  return f ? 1 : 0;
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  o.seed = (uint64_t)time(nullptr) ^ ((uint64_t)getpid() << 20);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die("%s needs a value", a.c_str());
      return argv[++i];
    };
    if (a == "--ranks") o.nranks = atoi(next());
    else if (a == "--seed") o.seed = strtoull(next(), nullptr, 0);
    else if (a == "--no-mp") o.mp = false;
    else if (a == "--no-sp") o.sp = false;
    else if (a == "--no-bench") o.bench = false;
    else if (a == "--bench-only") { o.correctness = false; o.sp = false; }
    else if (a == "--bench-max") o.bench_max = strtoull(next(), nullptr, 0);
    else if (a == "--iters") o.iters = atoi(next());
    else if (a == "--md") o.md = next();
    else if (a == "--csv") o.csv = next();
    else if (a == "-v") o.verbose = true;
    else if (a == "--sweep") o.sweep = true;
    else if (a == "--sweep-blocks") o.sweep_blocks = true;
    else if (a == "--timeout") comm_timeout = atof(next());
    else if (a == "--lp") o.lp = true;
    else if (a == "--lp-only") { o.lp = o.lp_only = true; o.bench = false; }
    else if (a == "--lp-big") o.lp_big = true;
    else if (a == "--lp-bench") { o.lp_bench = true; o.correctness = false; o.sp = false; }
    else if (a == "--lp-trace") { o.lp_trace = true; o.lp_bench = true; o.correctness = false; o.sp = false; }
    else if (a == "--lp-sweep") { o.lp_sweep = next(); o.lp_bench = true; o.correctness = false; o.sp = false; }
    else if (a == "--mismatch-only") { o.mismatch_only = true; o.bench = false; }
    else if (a == "--a2av") o.a2av = true;
    else if (a == "--a2av-only") { o.a2av = o.a2av_only = true; o.bench = false; }
    else if (a == "--a2av-bench") { o.a2av_bench = o.a2av_only = true; o.bench = true; }
    else if (a == "--a2av-csv") o.a2av_csv = next();
    else if (a == "--vclose") o.vclose = true;
    else if (a == "--vclose-only") { o.vclose = true; o.mp = o.sp = false; o.bench = false; }
    else if (a == "--vclose-rounds") o.vclose_rounds = atoi(next());
    else if (a == "--vclose-comms") o.vclose_comms = atoi(next());
    else if (a == "--vclose-a2av") o.vclose_a2av = true;
    else die("unknown argument %s", a.c_str());
  }
  if (o.nranks < 2 || o.nranks > 8) die("--ranks must be 2..8");
  if (o.iters < 1) o.iters = 1;
  if (o.vclose_rounds < 1) o.vclose_rounds = 1;
  if (o.vclose_comms < 1) o.vclose_comms = 1;
  printf("sc_gpu_test: ranks=%d seed=0x%llx mp=%d sp=%d bench=%d correctness=%d vclose=%d\n", o.nranks,
         (unsigned long long)o.seed, o.mp, o.sp, o.bench, o.correctness, o.vclose);
  int failures = 0;
  // Multi-process first: the parent must not initialise the GPU runtime before fork().
  if (o.mp && (o.correctness || o.bench || o.lp || o.a2av || o.mismatch_only)) {
    std::string dir = make_dir();
    std::vector<pid_t> kids;
    for (int r = 0; r < o.nranks; ++r) {
      pid_t p = fork();
      if (p < 0) die("fork: %s", strerror(errno));
      if (p == 0) {
        int rc = rank_main(r, "mp", dir, o, o.bench);
        fflush(stdout);
        _exit(rc);
      }
      kids.push_back(p);
    }
    for (size_t k = 0; k < kids.size(); ++k) {
      int st = 0;
      pid_t p = waitpid(-1, &st, 0);
      if (p < 0) die("waitpid: %s", strerror(errno));
      int rk = (int)(std::find(kids.begin(), kids.end(), p) - kids.begin());
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("[mp] rank %d exited with %s %d\n", rk, WIFEXITED(st) ? "status" : "signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        ++failures;
        for (pid_t other : kids)
          if (other != p) kill(other, SIGTERM);
      }
    }
    rm_dir(dir);
    printf("[mp] %s\n", failures ? "FAILED" : "all ranks passed");
  }
  if (o.sp && (o.correctness || o.lp || o.a2av || o.mismatch_only)) {
    std::string dir = make_dir();
    std::vector<std::thread> th;
    std::vector<int> rcs(o.nranks, 0);
    Options so = o;
    for (int r = 0; r < o.nranks; ++r) th.emplace_back([&, r] { rcs[r] = rank_main(r, "sp", dir, so, false); });
    for (auto& t : th) t.join();
    int f = 0;
    for (int r = 0; r < o.nranks; ++r) f += rcs[r] != 0;
    failures += f;
    rm_dir(dir);
    printf("[sp] %s\n", f ? "FAILED" : "all ranks passed");
  }
  if (o.vclose) failures += run_vclose(o);
  printf("sc_gpu_test: %s\n", failures ? "FAILED" : "PASSED");
  return failures ? 1 : 0;
}
