// cuDNN for conv2d and its input and filter gradients on fx::cuda, where the program is built with it.
//
//   // nvcc ... -DFLUXION_USE_CUDNN=1 -lcudnn   (the CMake target fluxion::cuda does both where
//   //                                           CMake finds cuDNN; FLUXION_CUDNN=OFF turns it off)
//   fx::tensor<float, fx::cuda> y = fx::conv2d(x, w, 1, fx::padding::same);   // cudnnConvolutionForward
//   fx::allow_cudnn(false);                                                   // back to im2col + cuBLAS
//
// A header cannot link a library, so cuDNN is an opt-in at build time, as OpenBLAS is for the cpu
// (FLUXION_USE_CBLAS): only nvcc builds that define FLUXION_USE_CUDNN and link libcudnn use it.
// Without it, and for what cuDNN cannot take, the convolutions run as im2col + cuBLAS
// (backend/cuda/window.hpp). The legacy cuDNN API is used (cudnnConvolutionForward and its two
// backward calls; present through cuDNN 9, as PyTorch used it), in fluxion's own layouts: NHWC
// tensors, and the filter, which cuDNN reads as (out_c, h, w, in_c), transposed from and to
// fluxion's HWIO by one small kernel.
//
// Routes. A float pass (forward, input gradient, filter gradient) of a geometry decides its route
// on its first call in a thread: cuDNN times its algorithms on the actual buffers
// (cudnnFind*AlgorithmEx, as torch.backends.cudnn.benchmark = True); its fastest *deterministic*
// one and im2col are then each timed as they run here (median of three, CUDA events), and the
// faster is kept for that geometry and pass. Deterministic only, by default: fluxion's results are
// the same on every run, on the cpu and on the GPU, and cuDNN's fastest filter-gradient algorithms
// add with atomics; fx::allow_nondeterministic_cudnn(true) lets them compete too, as in PyTorch. Float convolutions use plain FMA arithmetic (CUDNN_FMA_MATH) unless
// fx::allow_tf32(true) lets them use TF32 tensor cores, as for matmul. The search's workspace (up
// to 256 MB, a quarter of the free memory at most) comes from cudaMalloc and is freed after it;
// the kept algorithm's own workspace comes from the caching allocator on each call.
// detail::cudnn::report() lists the routes taken.
//
// What cuDNN does not take runs as im2col: double (cuDNN 9.19 has no deterministic NHWC double
// algorithm for the input gradient), padding that is larger after than before where that changes
// the output size (cuDNN pads both sides alike), and tensors of 2^31 elements or more.
// fx::allow_cudnn(false) sends every convolution to im2col, for comparison (process-wide, as
// allow_tf32).
#pragma once

#include <atomic>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../expr/conv.hpp"
#include "blas.hpp"
#include "memory.hpp"

#if defined(__CUDACC__) && defined(FLUXION_USE_CUDNN) && FLUXION_USE_CUDNN && \
    THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#define FLUXION_HAVE_CUDNN 1
#include <cudnn.h>

#include <map>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>
#else
#define FLUXION_HAVE_CUDNN 0
#endif

namespace fluxion {

namespace detail {
inline std::atomic<bool>& cudnn_flag() noexcept {
  static std::atomic<bool> flag{true};
  return flag;
}
inline std::atomic<bool>& cudnn_nondeterministic_flag() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}
/// Tests only: true makes a pass's first call choose cuDNN whenever it has a deterministic
/// algorithm, without timing im2col, so that cuDNN's numbers are tested on every geometry.
inline std::atomic<bool>& cudnn_always() noexcept {
  static std::atomic<bool> flag{false};
  return flag;
}
/// Convolution passes that ran through cuDNN so far in this process (the tests check that the
/// path they mean to test is taken).
inline std::atomic<long>& cudnn_passes() noexcept {
  static std::atomic<long> count{0};
  return count;
}
}  // namespace detail

/// Whether this program was built with cuDNN (nvcc, FLUXION_USE_CUDNN, libcudnn linked).
inline constexpr bool cudnn_built = FLUXION_HAVE_CUDNN != 0;

/// Lets conv2d and its gradients on fx::cuda run through cuDNN where the program is built with it
/// (the default); false sends them to im2col + cuBLAS. Process-wide.
inline void allow_cudnn(bool allowed) noexcept { detail::cudnn_flag().store(allowed); }

/// Whether convolutions on fx::cuda use cuDNN: built with it and not turned off by allow_cudnn.
inline bool cudnn_enabled() noexcept { return cudnn_built && detail::cudnn_flag().load(); }

/// Lets a convolution pass choose among all of cuDNN's algorithms, the non-deterministic ones too
/// (filter gradients that add with atomics: results that may differ in the last bits between runs),
/// as PyTorch does unless torch.use_deterministic_algorithms(True). Off by default: fluxion's
/// results are the same on every run. Decided per geometry on its next first call in each thread
/// (the setting is part of the plan's key). Process-wide, as allow_tf32.
inline void allow_nondeterministic_cudnn(bool allowed) noexcept { detail::cudnn_nondeterministic_flag().store(allowed); }

/// Whether allow_nondeterministic_cudnn(true) is in force.
inline bool nondeterministic_cudnn_allowed() noexcept { return detail::cudnn_nondeterministic_flag().load(); }

}  // namespace fluxion

#if FLUXION_HAVE_CUDNN
namespace fluxion::detail::cudnn {

/// Throws, naming the op, the cuDNN call, cuDNN's message and the geometry.
inline void check(cudnnStatus_t status, const char* op, const char* call, const kernels::conv2d_shape& s) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw std::runtime_error(std::string(op) + " on cuda: " + call + " failed with " + cudnnGetErrorString(status) +
                           " (batch=" + std::to_string(s.batch) + ", input " + std::to_string(s.in_h) + "x" +
                           std::to_string(s.in_w) + "x" + std::to_string(s.in_c) + ", filter " +
                           std::to_string(s.filter_h) + "x" + std::to_string(s.filter_w) + ", out_c=" +
                           std::to_string(s.out_c) + ")");
}

/// This thread's cuDNN handle, created on first use and destroyed with the thread; it queues on the
/// thread's current stream (stream.hpp), as cuBLAS and the Thrust kernels do.
inline cudnnHandle_t handle() {
  struct owner {
    cudnnHandle_t h = nullptr;
    cudaStream_t bound = nullptr;
    owner() { check(cudnnCreate(&h), "conv2d", "cudnnCreate", {}); }
    ~owner() {
      if (h) cudnnDestroy(h);
    }
  };
  thread_local owner o;
  if (const cudaStream_t stream = current_stream(); o.bound != stream) {
    check(cudnnSetStream(o.h, stream), "conv2d", "cudnnSetStream", {});
    o.bound = stream;
  }
  return o.h;
}

enum class pass { forward, input_gradient, filter_gradient };

/// What a pass of one geometry runs: not decided yet (its first call decides), a cuDNN algorithm,
/// or im2col (faster there, or no deterministic cuDNN algorithm).
enum class route { undecided, cudnn, im2col };

/// The descriptors of one geometry, and per pass what runs it, with the times that decided it.
struct plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  route routes[3] = {route::undecided, route::undecided, route::undecided};
  int algo[3] = {-1, -1, -1};
  std::size_t workspace[3] = {0, 0, 0};
  float cudnn_ms[3] = {-1, -1, -1}, im2col_ms[3] = {-1, -1, -1};  // -1: not timed
  bool any_determinism = false;  // allow_nondeterministic_cudnn when the plan was made

  plan() = default;
  plan(const plan&) = delete;
  plan& operator=(const plan&) = delete;
  ~plan() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
  }
};

/// Whether every size of s fits cuDNN's int arguments, each tensor below 2^31 elements.
inline bool fits(const kernels::conv2d_shape& s) {
  const index_t limit = index_t(0x7FFFFFFF);
  return s.input_size() < limit && s.output_size() < limit && s.filter_size() < limit;
}

/// Fills a new plan's descriptors for float geometry s; where cuDNN's output size differs from
/// fluxion's (asymmetric padding), every pass's route is im2col.
inline void describe(plan& p, const kernels::conv2d_shape& s, bool tf32) {
  const cudnnDataType_t type = CUDNN_DATA_FLOAT;
  const int n = int(s.batch), h = int(s.in_h), w = int(s.in_w), c = int(s.in_c), k = int(s.out_c);
  const char* op = "conv2d";
  check(cudnnCreateTensorDescriptor(&p.x), op, "cudnnCreateTensorDescriptor", s);
  check(cudnnCreateTensorDescriptor(&p.y), op, "cudnnCreateTensorDescriptor", s);
  check(cudnnCreateFilterDescriptor(&p.w), op, "cudnnCreateFilterDescriptor", s);
  check(cudnnCreateConvolutionDescriptor(&p.conv), op, "cudnnCreateConvolutionDescriptor", s);
  check(cudnnSetTensor4dDescriptor(p.x, CUDNN_TENSOR_NHWC, type, n, c, h, w), op, "cudnnSetTensor4dDescriptor", s);
  // NHWC filters are (out_c, h, w, in_c): fluxion's HWIO transposed (transpose_filter).
  check(cudnnSetFilter4dDescriptor(p.w, type, CUDNN_TENSOR_NHWC, k, c, int(s.filter_h), int(s.filter_w)), op,
        "cudnnSetFilter4dDescriptor", s);
  check(cudnnSetConvolution2dDescriptor(p.conv, int(s.pad_top), int(s.pad_left), int(s.stride_h), int(s.stride_w),
                                        int(s.dilation_h), int(s.dilation_w), CUDNN_CROSS_CORRELATION, type),
        op, "cudnnSetConvolution2dDescriptor", s);
  check(cudnnSetConvolutionMathType(p.conv, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), op,
        "cudnnSetConvolutionMathType", s);
  int on = 0, oc = 0, oh = 0, ow = 0;
  check(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &on, &oc, &oh, &ow), op,
        "cudnnGetConvolution2dForwardOutputDim", s);
  if (on != n || oc != k || oh != int(s.out_h) || ow != int(s.out_w))
    for (route& r : p.routes) r = route::im2col;
  else
    check(cudnnSetTensor4dDescriptor(p.y, CUDNN_TENSOR_NHWC, type, n, k, oh, ow), op, "cudnnSetTensor4dDescriptor",
          s);
}

using plan_key = std::tuple<index_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t,
                            index_t, index_t, index_t, index_t, index_t, bool, bool, bool>;

/// This thread's plans, one per geometry and TF32 setting.
inline std::map<plan_key, plan>& plans() {
  thread_local std::map<plan_key, plan> all;
  return all;
}

/// This thread's plan for geometry s, the current TF32 and non-determinism settings and
/// cudnn_always(), made on first use.
inline plan& plan_for(const kernels::conv2d_shape& s) {
  const bool tf32 = tf32_allowed();
  const plan_key key{s.batch,    s.in_h,       s.in_w,       s.in_c,    s.filter_h, s.filter_w, s.out_c,
                     s.stride_h, s.stride_w,   s.dilation_h, s.dilation_w, s.pad_top, s.pad_left, s.out_h,
                     s.out_w,    tf32,         cudnn_always().load(), nondeterministic_cudnn_allowed()};
  auto [it, fresh] = plans().try_emplace(key);
  if (!fresh) return it->second;
  it->second.any_determinism = std::get<17>(key);
  try {
    describe(it->second, s, tf32);
  } catch (...) {
    plans().erase(it);  // no half-made plan stays behind
    throw;
  }
  return it->second;
}

/// One line per geometry and pass this thread has decided: the route, cuDNN's algorithm and
/// both times (ms) where they were taken. For benchmarks and debugging.
inline std::string report() {
  std::string out;
  const char* names[3] = {"forward", "input gradient", "filter gradient"};
  for (const auto& [key, p] : plans()) {
    for (int i = 0; i < 3; ++i) {
      if (p.routes[i] == route::undecided) continue;
      out += "conv2d batch " + std::to_string(std::get<0>(key)) + ", " + std::to_string(std::get<1>(key)) + "x" +
             std::to_string(std::get<2>(key)) + "x" + std::to_string(std::get<3>(key)) + " -> " +
             std::to_string(std::get<6>(key)) + " (" + std::to_string(std::get<4>(key)) + "x" +
             std::to_string(std::get<5>(key)) + "), " + names[i] + ": " +
             (p.routes[i] == route::cudnn ? "cuDNN algorithm " + std::to_string(p.algo[i]) : std::string("im2col")) +
             " (cuDNN " + std::to_string(p.cudnn_ms[i]) + " ms, im2col " + std::to_string(p.im2col_ms[i]) +
             " ms)\n";
    }
  }
  return out;
}

/// The fastest algorithm among cuDNN's timed results (sorted fastest first): deterministic unless
/// allow_nondeterministic_cudnn(true); for float, tensor-core (TF32) arithmetic only where allowed.
/// -1 when none succeeded.
template <class Perf>
void keep_fastest(const Perf* results, int count, bool tensor_ops, bool any_determinism, plan& p, int slot) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || (!any_determinism && r.determinism != CUDNN_DETERMINISTIC)) continue;
    if (!tensor_ops && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    p.algo[slot] = int(r.algo);
    p.workspace[slot] = r.memory;
    p.cudnn_ms[slot] = r.time;
    return;
  }
  p.algo[slot] = -1;
}

/// out = in^T for a row-major (rows x cols) `in`: fluxion's HWIO filter, a (h w in_c) x out_c
/// matrix, to cuDNN's (out_c, h, w, in_c), and back. Filters are small: one thread per element.
template <class T>
struct transpose {
  const T* in;
  T* out;
  index_t rows, cols;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {  // i indexes `in`: row i / cols, column i % cols
    out[(i % cols) * rows + i / cols] = in[i];
  }
};

template <class T>
void transpose_filter(const kernels::conv2d_shape& s, const T* in, T* out, bool to_cudnn) {
  const index_t k = s.filter_h * s.filter_w * s.in_c, o = s.out_c;
  const index_t rows = to_cudnn ? k : o, cols = to_cudnn ? o : k;
  thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), rows * cols,
                     transpose<T>{in, out, rows, cols});
}

/// The workspace cuDNN's algorithm search may use: up to 256 MB (less where the device has less
/// free), straight from cudaMalloc and freed after the search, so that a one-time buffer does not
/// sit in the caching allocator.
struct search_workspace {
  void* data = nullptr;
  std::size_t bytes = std::size_t(256) << 20;
  search_workspace() {
    std::size_t free_bytes = 0, total = 0;
    if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess && free_bytes / 4 < bytes) bytes = free_bytes / 4;
    while (bytes >= (std::size_t(1) << 20) && cudaMalloc(&data, bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      data = nullptr;
      bytes /= 2;
    }
    if (!data) bytes = 0;
  }
  ~search_workspace() {
    if (data) cudaFree(data);
  }
  search_workspace(const search_workspace&) = delete;
  search_workspace& operator=(const search_workspace&) = delete;
};

/// Milliseconds of f() on the device: the median of three runs between CUDA events, after one
/// untimed run (allocations and first-launch costs out of the timing).
template <class F>
float device_ms(const F& f) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  f();
  float ms[3] = {0, 0, 0};
  for (float& m : ms) {
    cudaEventRecord(start, current_stream());
    f();
    cudaEventRecord(stop, current_stream());
    cudaEventSynchronize(stop);
    cudaEventElapsedTime(&m, start, stop);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  const float lo = ms[0] < ms[1] ? ms[0] : ms[1], hi = ms[0] < ms[1] ? ms[1] : ms[0];
  return ms[2] < lo ? lo : (ms[2] > hi ? hi : ms[2]);
}

/// One pass through cuDNN's kept algorithm: the filter to cuDNN's layout (forward, input
/// gradient) or the filter gradient back to fluxion's, around `call`.
template <class T, class Call>
void run_cudnn(const plan& p, pass which, const kernels::conv2d_shape& s, const T* b, T* out, T* filter,
               T* filter_out, const Call& call, const char* op) {
  const int slot = int(which);
  if (which != pass::filter_gradient) transpose_filter(s, b, filter, true);
  device_scratch<unsigned char> ws{index_t(p.workspace[slot])};
  check(call(p.algo[slot], ws.data(), p.workspace[slot]), op,
        which == pass::forward          ? "cudnnConvolutionForward"
        : which == pass::input_gradient ? "cudnnConvolutionBackwardData"
                                        : "cudnnConvolutionBackwardFilter",
        s);
  if (which == pass::filter_gradient) transpose_filter(s, filter_out, out, false);
}

/// Runs one pass of a float convolution through cuDNN where that is this geometry's route, and
/// returns false where it is not (the caller runs `im2col`, the same pass as im2col + cuBLAS).
/// forward: a = x, b = w, out = y; input_gradient: a = dy, b = w, out = dx; filter_gradient: a = x,
/// b = dy, out = dw. A pass's first call decides its route: cuDNN times its algorithms on these
/// buffers (cudnnFind), then its fastest deterministic algorithm and im2col are each timed as they
/// run here (the median of three runs), and the faster is kept for that geometry and pass.
template <class T, class Im2col>
bool run(pass which, const kernels::conv2d_shape& s, const T* a, const T* b, T* out, const Im2col& im2col) {
  // Double stays on im2col: on an H200 with cuDNN 9.19, cuDNN had no deterministic NHWC double
  // algorithm for the input gradient, and its double forward pass was further from the cpu's than
  // 1e-12 (relative), where im2col + cuBLAS's DGEMM is within it.
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (!cudnn_enabled() || !fits(s)) return false;
    const char* op = which == pass::forward          ? "conv2d"
                     : which == pass::input_gradient ? "conv2d input gradient"
                                                     : "conv2d filter gradient";
    plan& p = plan_for(s);
    const int slot = int(which);
    if (p.routes[slot] == route::im2col) return false;
    const bool tensor_ops = tf32_allowed(), any_determinism = p.any_determinism;
    cudnnHandle_t h = handle();
    const T one = 1, zero = 0;
    device_scratch<T> filter(which == pass::filter_gradient ? 0 : s.filter_size());
    device_scratch<T> filter_out(which == pass::filter_gradient ? s.filter_size() : 0);
    auto call = [&](int algo, void* ws, std::size_t ws_bytes) {
      switch (which) {
        case pass::forward:
          return cudnnConvolutionForward(h, &one, p.x, a, p.w, filter.data(), p.conv,
                                         cudnnConvolutionFwdAlgo_t(algo), ws, ws_bytes, &zero, p.y, out);
        case pass::input_gradient:
          return cudnnConvolutionBackwardData(h, &one, p.w, filter.data(), p.y, a, p.conv,
                                              cudnnConvolutionBwdDataAlgo_t(algo), ws, ws_bytes, &zero, p.x, out);
        default:
          return cudnnConvolutionBackwardFilter(h, &one, p.x, a, p.y, b, p.conv,
                                                cudnnConvolutionBwdFilterAlgo_t(algo), ws, ws_bytes, &zero, p.w,
                                                filter_out.data());
      }
    };
    if (p.routes[slot] == route::undecided) {  // this pass's first call in this thread: time both
      if (which != pass::filter_gradient) transpose_filter(s, b, filter.data(), true);
      {
        search_workspace ws;
        int found = 0;
        if (which == pass::forward) {
          cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
          check(cudnnFindConvolutionForwardAlgorithmEx(h, p.x, a, p.w, filter.data(), p.conv, p.y, out,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, r, ws.data,
                                                       ws.bytes),
                op, "cudnnFindConvolutionForwardAlgorithmEx", s);
          keep_fastest(r, found, tensor_ops, any_determinism, p, slot);
        } else if (which == pass::input_gradient) {
          cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
          check(cudnnFindConvolutionBackwardDataAlgorithmEx(h, p.w, filter.data(), p.y, a, p.conv, p.x, out,
                                                            CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, r,
                                                            ws.data, ws.bytes),
                op, "cudnnFindConvolutionBackwardDataAlgorithmEx", s);
          keep_fastest(r, found, tensor_ops, any_determinism, p, slot);
        } else {
          cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
          check(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, p.x, a, p.y, b, p.conv, p.w, filter_out.data(),
                                                              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, r,
                                                              ws.data, ws.bytes),
                op, "cudnnFindConvolutionBackwardFilterAlgorithmEx", s);
          keep_fastest(r, found, tensor_ops, any_determinism, p, slot);
        }
      }
      // Both routes timed the same way, as they run here: cuDNN's with the filter's transposes
      // and its workspace from the cache, im2col with its matrix.
      if (p.algo[slot] >= 0 && !cudnn_always()) {
        p.cudnn_ms[slot] = device_ms([&] { run_cudnn(p, which, s, b, out, filter.data(), filter_out.data(), call, op); });
        p.im2col_ms[slot] = device_ms(im2col);
      }
      const bool cudnn_faster = p.algo[slot] >= 0 && (cudnn_always() || p.cudnn_ms[slot] < p.im2col_ms[slot]);
      p.routes[slot] = cudnn_faster ? route::cudnn : route::im2col;
      if (!cudnn_faster) return false;
    }
    run_cudnn(p, which, s, b, out, filter.data(), filter_out.data(), call, op);
    ++cudnn_passes();
    return true;
  }
}

}  // namespace fluxion::detail::cudnn
#endif
