// Element-wise kernels of the dense-math entry points (math.cu): what a dense model needs beside
// the vendor BLAS's GEMM/AXPY/SCAL. Row-major float32; grid-stride loops, so any grid covers any n.
#pragma once

#include "compat.h"
#include "../include/sparkcomms.h"

__device__ __forceinline__ float sc_act_apply(float x, int act) {
  switch (act) {
    case SC_ACT_RELU: return x > 0.f ? x : 0.f;
    case SC_ACT_TANH: return tanhf(x);
    case SC_ACT_SIGMOID: return 1.f / (1.f + expf(-x));
    default: return x;
  }
}

// act'(x) written through the activation's output y = act(x).
__device__ __forceinline__ float sc_act_derivative(float y, int act) {
  switch (act) {
    case SC_ACT_RELU: return y > 0.f ? 1.f : 0.f;
    case SC_ACT_TANH: return 1.f - y * y;
    case SC_ACT_SIGMOID: return y * (1.f - y);
    default: return 1.f;
  }
}

__global__ void sc_k_bias_activation(float* y, const float* bias, size_t n, int cols, int act) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    float v = y[i];
    if (bias) v += bias[i % (size_t)cols];
    y[i] = sc_act_apply(v, act);
  }
}

__global__ void sc_k_activation_backward(float* grad, const float* out, size_t n, int act) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    grad[i] *= sc_act_derivative(out[i], act);
  }
}

// One thread per column; the rows are added in order, so the result does not depend on the grid.
__global__ void sc_k_column_sums(const float* x, int rows, int cols, float alpha, float* out) {
  for (size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x; c < (size_t)cols; c += (size_t)gridDim.x * blockDim.x) {
    float s = 0.f;
    for (int r = 0; r < rows; r++) s += x[(size_t)r * cols + c];
    out[c] = alpha * s;
  }
}

// One block of SC_XENT_THREADS: thread t takes elements t, t + T, ...; the partial losses are then
// added pairwise in shared memory, a fixed order for a fixed n.
#define SC_XENT_THREADS 256
__global__ void __launch_bounds__(SC_XENT_THREADS)
sc_k_sigmoid_xent(const float* z, const float* y, int n, float* grad, float* loss) {
  __shared__ float part[SC_XENT_THREADS];
  float s = 0.f;
  float inv_n = 1.f / (float)n;
  for (size_t i = threadIdx.x; i < (size_t)n; i += SC_XENT_THREADS) {
    float zi = z[i], yi = y[i];
    float e = expf(-fabsf(zi));
    float p = zi >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);  // sigmoid(z) without overflow
    grad[i] = (p - yi) * inv_n;
    s += fmaxf(zi, 0.f) - zi * yi + log1pf(e);              // log(1 + e^z) - y z, stable
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = SC_XENT_THREADS / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) loss[0] = part[0] * inv_n;
}
