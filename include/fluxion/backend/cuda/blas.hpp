// cuBLAS for fx::matmul on fx::cuda: float and double products go to cublas{S,D}gemm (strided-batched
// when the batch is evenly spaced), one handle per host thread, on the thread's current stream
// (stream.hpp).
//
//   fx::tensor<float, fx::cuda> c = fx::matmul(a, b);   // cublasSgemm, full float32
//   fx::allow_tf32(true);                                 // opt in: float products on TF32 tensor cores
//
// TF32 rounds the operands to 10 mantissa bits (relative error near 3e-4), so it is off unless the
// program asks for it, as in PyTorch (torch.backends.cuda.matmul.allow_tf32). Without nvcc (the
// OpenMP device system that tests the device path on a CPU), or with FLUXION_NO_CUBLAS defined,
// every product runs through the Thrust kernel of backend/cuda/evaluator.hpp; programs built with
// nvcc link cuBLAS (-lcublas; the CMake target fluxion::cuda adds it for CUDA sources).
#pragma once

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "../../core/shape.hpp"

#if defined(__CUDACC__) && !defined(FLUXION_NO_CUBLAS)
#define FLUXION_HAVE_CUBLAS 1
#include <cublas_v2.h>

#include "stream.hpp"
#else
#define FLUXION_HAVE_CUBLAS 0
#endif

namespace fluxion {

namespace detail {
inline std::atomic<bool>& tf32_flag() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}
}  // namespace detail

/// Lets float matrix products on fx::cuda use TF32 tensor cores (faster, about 3e-4 relative
/// error). Off by default; process-wide; no effect on the cpu or on double.
inline void allow_tf32(bool allowed) noexcept { detail::tf32_flag().store(allowed); }

/// Whether float products on fx::cuda may use TF32 (see allow_tf32).
inline bool tf32_allowed() noexcept { return detail::tf32_flag().load(); }

}  // namespace fluxion

#if FLUXION_HAVE_CUBLAS
namespace fluxion::detail::cublas {

inline const char* status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "unknown cuBLAS status";
  }
}

inline void check(cublasStatus_t s, const char* call, index_t m, index_t n, index_t k, index_t batch) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("matmul on cuda: ") + call + " failed with " + status_name(s) +
                             " (m=" + std::to_string(m) + ", n=" + std::to_string(n) + ", k=" + std::to_string(k) +
                             ", batch=" + std::to_string(batch) + ")");
}

/// This thread's cuBLAS handle, created on first use and destroyed with the thread, queuing on the
/// thread's current stream (set again when the thread has moved to another: fx::own_stream).
inline cublasHandle_t handle() {
  struct owner {
    cublasHandle_t h = nullptr;
    cudaStream_t bound = nullptr;
    owner() { check(cublasCreate(&h), "cublasCreate", 0, 0, 0, 0); }
    ~owner() {
      if (h) cublasDestroy(h);
    }
  };
  thread_local owner o;
  if (const cudaStream_t stream = current_stream(); o.bound != stream) {
    check(cublasSetStream(o.h, stream), "cublasSetStream", 0, 0, 0, 0);
    o.bound = stream;
  }
  return o.h;
}

/// Row-major C_b = op(A_b) op(B_b) for b < batch, where A_b = a + a_off[b] and B_b = b + b_off[b]
/// (host arrays), m x k times k x n. Column-major cuBLAS computes C^T = op(B)^T op(A)^T, so B goes
/// first; k > 0 and every dimension fits in an int (the caller checks).
template <class T>
void gemm(bool ta, bool tb, index_t batch, index_t m, index_t n, index_t k, const T* a, const index_t* a_off,
          const T* b, const index_t* b_off, T* c) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  cublasHandle_t h = handle();
  const bool tf32 = std::is_same_v<T, float> && tf32_allowed();
  check(cublasSetMathMode(h, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH), "cublasSetMathMode", m, n, k,
        batch);
  const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
  const int ld_b = tb ? ik : in, ld_a = ta ? im : ik;
  const T one = 1, zero = 0;
  const long long sa = batch > 1 ? a_off[1] - a_off[0] : 0, sb = batch > 1 ? b_off[1] - b_off[0] : 0;
  bool strided = true;
  for (index_t i = 1; i < batch && strided; ++i)
    strided = a_off[i] - a_off[i - 1] == sa && b_off[i] - b_off[i - 1] == sb;
  if (strided) {
    const long long sc = m * n;
    if constexpr (std::is_same_v<T, float>)
      check(cublasSgemmStridedBatched(h, op_b, op_a, in, im, ik, &one, b + b_off[0], ld_b, sb, a + a_off[0], ld_a, sa,
                                      &zero, c, in, sc, static_cast<int>(batch)),
            "cublasSgemmStridedBatched", m, n, k, batch);
    else
      check(cublasDgemmStridedBatched(h, op_b, op_a, in, im, ik, &one, b + b_off[0], ld_b, sb, a + a_off[0], ld_a, sa,
                                      &zero, c, in, sc, static_cast<int>(batch)),
            "cublasDgemmStridedBatched", m, n, k, batch);
    return;
  }
  for (index_t i = 0; i < batch; ++i) {
    T* ci = c + i * m * n;
    if constexpr (std::is_same_v<T, float>)
      check(cublasSgemm(h, op_b, op_a, in, im, ik, &one, b + b_off[i], ld_b, a + a_off[i], ld_a, &zero, ci, in),
            "cublasSgemm", m, n, k, batch);
    else
      check(cublasDgemm(h, op_b, op_a, in, im, ik, &one, b + b_off[i], ld_b, a + a_off[i], ld_a, &zero, ci, in),
            "cublasDgemm", m, n, k, batch);
  }
}

}  // namespace fluxion::detail::cublas
#endif
