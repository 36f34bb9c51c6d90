// Dense float32 math on the device: GEMM, AXPY and SCAL through the vendor BLAS (cuBLAS on CUDA,
// hipBLAS on HIP, loaded with dlopen on first use like the collective library, so the GPU library
// links against neither), and the element-wise kernels of device/dense_math.cuh.
// Part of library.cu, the GPU library's one translation unit (see there); not compiled alone.
#include "core/comm.h"
#include "core/dl.h"
#include "device/dense_math.cuh"

#include <climits>
#include <mutex>
#include <string>

typedef int bStatus;     // cublasStatus_t / hipblasStatus_t: 0 = success in both
typedef void* bHandle;   // cublasHandle_t / hipblasHandle_t
typedef int bOperation;  // cublasOperation_t / hipblasOperation_t

struct ScBlas {
  void* h = nullptr;
  std::string why;
  const char* name = nullptr;
  bOperation op_n = 0, op_t = 1;
  bStatus (*Create)(bHandle*) = nullptr;
  bStatus (*Destroy)(bHandle) = nullptr;
  bStatus (*SetStream)(bHandle, gpuStream_t) = nullptr;
  bStatus (*Sgemm)(bHandle, bOperation, bOperation, int, int, int, const float*, const float*, int, const float*,
                   int, const float*, float*, int) = nullptr;
  bStatus (*Saxpy)(bHandle, int, const float*, const float*, int, float*, int) = nullptr;
  bStatus (*Sscal)(bHandle, int, const float*, float*, int) = nullptr;
};
static ScBlas g_blas;
static std::once_flag g_blas_once;

struct sc_blas {
  bHandle handle;
  gpuStream_t stream;
};

static void sc_blas_load() {
  const char* env = getenv("SPARKCOMMS_BLAS_LIB");
#if SC_HIP
  const char* cands[] = {env, "libhipblas.so.3", "libhipblas.so.2", "libhipblas.so"};
  const char* names[] = {"hipblasCreate", "hipblasDestroy", "hipblasSetStream", "hipblasSgemm", "hipblasSaxpy",
                         "hipblasSscal"};
  g_blas.op_n = 111;  // HIPBLAS_OP_N
  g_blas.op_t = 112;  // HIPBLAS_OP_T
#else
  const char* cands[] = {env, "libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  const char* names[] = {"cublasCreate_v2", "cublasDestroy_v2", "cublasSetStream_v2", "cublasSgemm_v2",
                         "cublasSaxpy_v2", "cublasSscal_v2"};
  g_blas.op_n = 0;  // CUBLAS_OP_N
  g_blas.op_t = 1;  // CUBLAS_OP_T
#endif
  std::string errs;
  g_blas.h = sc_dlopen_first(cands, sizeof cands / sizeof cands[0], &g_blas.name, &errs);
  if (!g_blas.h) {
    g_blas.why = "BLAS library not loadable (" + errs + "set SPARKCOMMS_BLAS_LIB to its path)";
    return;
  }
  void** slots[] = {(void**)&g_blas.Create, (void**)&g_blas.Destroy, (void**)&g_blas.SetStream,
                    (void**)&g_blas.Sgemm, (void**)&g_blas.Saxpy, (void**)&g_blas.Sscal};
  std::string missing;
  for (int i = 0; i < 6; i++) {
    *slots[i] = dlsym(g_blas.h, names[i]);
    if (!*slots[i]) missing += std::string(names[i]) + " ";
  }
  if (!missing.empty()) {
    dlclose(g_blas.h);
    g_blas.h = nullptr;
    g_blas.why = std::string("BLAS library ") + g_blas.name + " unusable: missing " + missing;
  }
}

static bool sc_blas_ready() {
  std::call_once(g_blas_once, sc_blas_load);
  if (!g_blas.h) {
    sc_fail(SC_ERR_VENDOR, "%s", g_blas.why.c_str());
    return false;
  }
  return true;
}

#define BLAS_TRY(call, what)                                                                 \
  do {                                                                                       \
    bStatus s_ = (call);                                                                     \
    if (s_ != 0) return sc_fail(SC_ERR_RUNTIME, "%s failed: BLAS status %d (%s)", what, s_, g_blas.name); \
  } while (0)

extern "C" int sc_blas_available(void) { return sc_blas_ready() ? 1 : 0; }

extern "C" int sc_blas_create(void* stream, sc_blas_t* out) {
  if (!out) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_create: out is null");
  *out = nullptr;
  if (!sc_blas_ready()) return SC_ERR_VENDOR;
  bHandle h = nullptr;
  BLAS_TRY(g_blas.Create(&h), "BLAS handle creation");
  bStatus s = g_blas.SetStream(h, (gpuStream_t)stream);
  if (s != 0) {
    g_blas.Destroy(h);
    return sc_fail(SC_ERR_RUNTIME, "BLAS set-stream failed: status %d (%s)", s, g_blas.name);
  }
  *out = new sc_blas{h, (gpuStream_t)stream};
  return SC_OK;
}

extern "C" int sc_blas_destroy(sc_blas_t b) {
  if (!b) return SC_OK;
  bStatus s = g_blas.Destroy(b->handle);
  delete b;
  if (s != 0) return sc_fail(SC_ERR_RUNTIME, "BLAS handle destruction failed: status %d (%s)", s, g_blas.name);
  return SC_OK;
}

extern "C" int sc_blas_sgemm(sc_blas_t b, int trans_a, int trans_b, int m, int n, int k, float alpha, const void* a,
                             int lda, const void* bm, int ldb, float beta, void* c, int ldc) {
  if (!b) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sgemm: null handle");
  if (m < 0 || n < 0 || k < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sgemm: negative size %d x %d x %d", m, n, k);
  if ((trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1)) {
    return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sgemm: trans flags must be 0 or 1, got %d, %d", trans_a, trans_b);
  }
  if (m == 0 || n == 0) return SC_OK;
  // column-major: op(A) is m x k, so A is m x k (lda >= m) or k x m (lda >= k); likewise B and C
  int rows_a = trans_a ? k : m, rows_b = trans_b ? n : k;
  if (lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) || ldc < (m > 1 ? m : 1)) {
    return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sgemm: leading dimensions %d, %d, %d too small for %d x %d x %d", lda,
                   ldb, ldc, m, n, k);
  }
  if ((k > 0 && (!a || !bm)) || !c) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sgemm: null matrix");
  BLAS_TRY(g_blas.Sgemm(b->handle, trans_a ? g_blas.op_t : g_blas.op_n, trans_b ? g_blas.op_t : g_blas.op_n, m, n, k,
                        &alpha, (const float*)a, lda, (const float*)bm, ldb, &beta, (float*)c, ldc),
           "sgemm");
  return SC_OK;
}

extern "C" int sc_blas_saxpy(sc_blas_t b, int n, float alpha, const void* x, void* y) {
  if (!b) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_saxpy: null handle");
  if (n < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_saxpy: negative count %d", n);
  if (n == 0) return SC_OK;
  if (!x || !y) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_saxpy: null vector");
  BLAS_TRY(g_blas.Saxpy(b->handle, n, &alpha, (const float*)x, 1, (float*)y, 1), "saxpy");
  return SC_OK;
}

extern "C" int sc_blas_sscal(sc_blas_t b, int n, float alpha, void* x) {
  if (!b) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sscal: null handle");
  if (n < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sscal: negative count %d", n);
  if (n == 0) return SC_OK;
  if (!x) return sc_fail(SC_ERR_INVALID_ARG, "sc_blas_sscal: null vector");
  BLAS_TRY(g_blas.Sscal(b->handle, n, &alpha, (float*)x, 1), "sscal");
  return SC_OK;
}

static int sc_math_grid(size_t n) {
  size_t g = (n + 255) / 256;
  return (int)(g < 1 ? 1 : g > 4096 ? 4096 : g);
}

static int sc_act_check(int act, const char* fn) {
  if (act < SC_ACT_IDENTITY || act > SC_ACT_SIGMOID) return sc_fail(SC_ERR_INVALID_ARG, "%s: unknown activation %d", fn, act);
  return SC_OK;
}

extern "C" int sc_math_bias_activation(void* y, const void* bias, int rows, int cols, int act, void* stream) {
  SC_TRY(sc_act_check(act, "sc_math_bias_activation"));
  if (rows < 0 || cols < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_bias_activation: negative size %d x %d", rows, cols);
  size_t n = (size_t)rows * (size_t)cols;
  if (n == 0) return SC_OK;
  if (!y) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_bias_activation: null matrix");
  sc_k_bias_activation<<<sc_math_grid(n), 256, 0, (gpuStream_t)stream>>>((float*)y, (const float*)bias, n, cols, act);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

extern "C" int sc_math_activation_backward(void* grad, const void* out, int n, int act, void* stream) {
  SC_TRY(sc_act_check(act, "sc_math_activation_backward"));
  if (n < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_activation_backward: negative count %d", n);
  if (n == 0) return SC_OK;
  if (!grad || !out) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_activation_backward: null buffer");
  sc_k_activation_backward<<<sc_math_grid((size_t)n), 256, 0, (gpuStream_t)stream>>>((float*)grad, (const float*)out,
                                                                                     (size_t)n, act);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

extern "C" int sc_math_column_sums(const void* x, int rows, int cols, float alpha, void* out, void* stream) {
  if (rows < 0 || cols < 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_column_sums: negative size %d x %d", rows, cols);
  if (cols == 0) return SC_OK;
  if (!out || (rows > 0 && !x)) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_column_sums: null buffer");
  sc_k_column_sums<<<sc_math_grid((size_t)cols), 256, 0, (gpuStream_t)stream>>>((const float*)x, rows, cols, alpha,
                                                                                (float*)out);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}

extern "C" int sc_math_sigmoid_xent(const void* logits, const void* labels, int n, void* grad, void* loss,
                                    void* stream) {
  if (n <= 0) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_sigmoid_xent: count must be > 0, got %d", n);
  if (!logits || !labels || !grad || !loss) return sc_fail(SC_ERR_INVALID_ARG, "sc_math_sigmoid_xent: null buffer");
  sc_k_sigmoid_xent<<<1, SC_XENT_THREADS, 0, (gpuStream_t)stream>>>((const float*)logits, (const float*)labels, n,
                                                                   (float*)grad, (float*)loss);
  GPU_TRY(gpuGetLastError());
  return SC_OK;
}
