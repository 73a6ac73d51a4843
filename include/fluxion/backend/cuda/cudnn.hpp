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
// backward calls; present through cuDNN 9, as PyTorch used it) in two layouts:
// - fluxion's own: NHWC tensors, and the filter, which cuDNN reads as (out_c, h, w, in_c),
//   transposed from and to fluxion's HWIO by one small kernel;
// - NCHW, PyTorch's layout, where cuDNN's float kernels without tensor cores are its most
//   developed (stop 43, H200: cuDNN's fastest deterministic NHWC forward of the CNN's 5x5 32 -> 64
//   convolution at batch 256 took 243-276 us, PyTorch's NCHW one 166-170): the operands are
//   converted by cudnnTransformTensor before the call and the result after it (each conversion
//   one pass over a tensor), and the filter to (out_c, in_c, h, w).
//
// Routes. A float pass (forward, input gradient, filter gradient) of a geometry decides its route
// on its first call in a thread: cuDNN times its algorithms on the actual buffers, in each layout
// (cudnnFind*AlgorithmEx, as torch.backends.cudnn.benchmark = True); the fastest *deterministic*
// one of each layout and im2col are then each timed as they run here, conversions included
// (median of three, CUDA events), and the fastest is kept for that geometry and pass. Deterministic only, by default: fluxion's results are
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
/// Tests only: which cuDNN layouts a pass's first call may choose: 0 either (the default; the
/// faster), 1 NHWC only, 2 NCHW only.
inline std::atomic<int>& cudnn_layouts() noexcept {
  static std::atomic<int> which{0};
  return which;
}
/// Convolution passes that ran through cuDNN so far in this process, in either layout, and those
/// of them in NCHW (the tests check that the path they mean to test is taken).
inline std::atomic<long>& cudnn_passes() noexcept {
  static std::atomic<long> count{0};
  return count;
}
inline std::atomic<long>& cudnn_nchw_passes() noexcept {
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

/// The two layouts cuDNN runs a pass in (the header's comment): fluxion's own, and NCHW through
/// converted copies.
enum class layout { nhwc, nchw };

/// What a pass of one geometry runs: not decided yet (its first call decides), cuDNN in one of its
/// layouts, or im2col (faster there, or no deterministic cuDNN algorithm).
enum class route { undecided, cudnn_nhwc, cudnn_nchw, im2col };

/// One layout's descriptors: the input and the output, the filter as cuDNN's convolution reads it,
/// and the same filter as a tensor (n = out_c, c = in_c, h, w), which the conversions read and write.
struct descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, filter_tensor = nullptr;
  cudnnFilterDescriptor_t w = nullptr;

  descriptors() = default;
  descriptors(const descriptors&) = delete;
  descriptors& operator=(const descriptors&) = delete;
  ~descriptors() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (filter_tensor) cudnnDestroyTensorDescriptor(filter_tensor);
    if (w) cudnnDestroyFilterDescriptor(w);
  }
};

/// The descriptors of one geometry in both layouts, and per pass what runs it, with the times that
/// decided it: [layout][pass] for cuDNN's algorithm, its workspace and its time.
struct plan {
  descriptors d[2];
  cudnnConvolutionDescriptor_t conv = nullptr;
  route routes[3] = {route::undecided, route::undecided, route::undecided};
  int algo[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
  std::size_t workspace[2][3] = {{0, 0, 0}, {0, 0, 0}};
  float cudnn_ms[2][3] = {{-1, -1, -1}, {-1, -1, -1}}, im2col_ms[3] = {-1, -1, -1};  // -1: not timed
  bool any_determinism = false;  // allow_nondeterministic_cudnn when the plan was made
  int layouts = 0;               // cudnn_layouts() when the plan was made

  plan() = default;
  plan(const plan&) = delete;
  plan& operator=(const plan&) = delete;
  ~plan() {
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
  const int fh = int(s.filter_h), fw = int(s.filter_w);
  const char* op = "conv2d";
  const cudnnTensorFormat_t formats[2] = {CUDNN_TENSOR_NHWC, CUDNN_TENSOR_NCHW};
  check(cudnnCreateConvolutionDescriptor(&p.conv), op, "cudnnCreateConvolutionDescriptor", s);
  for (int l = 0; l < 2; ++l) {
    descriptors& d = p.d[l];
    check(cudnnCreateTensorDescriptor(&d.x), op, "cudnnCreateTensorDescriptor", s);
    check(cudnnCreateTensorDescriptor(&d.y), op, "cudnnCreateTensorDescriptor", s);
    check(cudnnCreateTensorDescriptor(&d.filter_tensor), op, "cudnnCreateTensorDescriptor", s);
    check(cudnnCreateFilterDescriptor(&d.w), op, "cudnnCreateFilterDescriptor", s);
    check(cudnnSetTensor4dDescriptor(d.x, formats[l], type, n, c, h, w), op, "cudnnSetTensor4dDescriptor", s);
    // NHWC filters are (out_c, h, w, in_c): fluxion's HWIO transposed (transpose_filter); NCHW
    // filters are (out_c, in_c, h, w), converted from those.
    check(cudnnSetFilter4dDescriptor(d.w, type, formats[l], k, c, fh, fw), op, "cudnnSetFilter4dDescriptor", s);
    check(cudnnSetTensor4dDescriptor(d.filter_tensor, formats[l], type, k, c, fh, fw), op,
          "cudnnSetTensor4dDescriptor", s);
  }
  check(cudnnSetConvolution2dDescriptor(p.conv, int(s.pad_top), int(s.pad_left), int(s.stride_h), int(s.stride_w),
                                        int(s.dilation_h), int(s.dilation_w), CUDNN_CROSS_CORRELATION, type),
        op, "cudnnSetConvolution2dDescriptor", s);
  check(cudnnSetConvolutionMathType(p.conv, tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH), op,
        "cudnnSetConvolutionMathType", s);
  int on = 0, oc = 0, oh = 0, ow = 0;
  check(cudnnGetConvolution2dForwardOutputDim(p.conv, p.d[0].x, p.d[0].w, &on, &oc, &oh, &ow), op,
        "cudnnGetConvolution2dForwardOutputDim", s);
  if (on != n || oc != k || oh != int(s.out_h) || ow != int(s.out_w)) {
    for (route& r : p.routes) r = route::im2col;
    return;
  }
  for (int l = 0; l < 2; ++l)
    check(cudnnSetTensor4dDescriptor(p.d[l].y, formats[l], type, n, k, oh, ow), op, "cudnnSetTensor4dDescriptor",
          s);
}

using plan_key = std::tuple<index_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t, index_t,
                            index_t, index_t, index_t, index_t, index_t, bool, bool, bool, int>;

/// This thread's plans, one per geometry and TF32 setting.
inline std::map<plan_key, plan>& plans() {
  thread_local std::map<plan_key, plan> all;
  return all;
}

/// This thread's plan for geometry s, the current TF32 and non-determinism settings and the test
/// hooks cudnn_always() and cudnn_layouts(), made on first use.
inline plan& plan_for(const kernels::conv2d_shape& s) {
  const bool tf32 = tf32_allowed();
  const plan_key key{s.batch,    s.in_h,       s.in_w,       s.in_c,    s.filter_h, s.filter_w, s.out_c,
                     s.stride_h, s.stride_w,   s.dilation_h, s.dilation_w, s.pad_top, s.pad_left, s.out_h,
                     s.out_w,    tf32,         cudnn_always().load(), nondeterministic_cudnn_allowed(),
                     cudnn_layouts().load()};
  auto [it, fresh] = plans().try_emplace(key);
  if (!fresh) return it->second;
  it->second.any_determinism = std::get<17>(key);
  it->second.layouts = std::get<18>(key);
  try {
    describe(it->second, s, tf32);
  } catch (...) {
    plans().erase(it);  // no half-made plan stays behind
    throw;
  }
  return it->second;
}

/// One line per geometry and pass this thread has decided: the route, and cuDNN's algorithm and
/// the times (ms) of each layout and of im2col where they were taken. For benchmarks and debugging.
inline std::string report() {
  std::string out;
  const char* names[3] = {"forward", "input gradient", "filter gradient"};
  for (const auto& [key, p] : plans()) {
    for (int i = 0; i < 3; ++i) {
      if (p.routes[i] == route::undecided) continue;
      const int l = p.routes[i] == route::cudnn_nchw ? 1 : 0;
      out += "conv2d batch " + std::to_string(std::get<0>(key)) + ", " + std::to_string(std::get<1>(key)) + "x" +
             std::to_string(std::get<2>(key)) + "x" + std::to_string(std::get<3>(key)) + " -> " +
             std::to_string(std::get<6>(key)) + " (" + std::to_string(std::get<4>(key)) + "x" +
             std::to_string(std::get<5>(key)) + "), " + names[i] + ": " +
             (p.routes[i] == route::im2col
                  ? std::string("im2col")
                  : std::string(l ? "cuDNN NCHW" : "cuDNN NHWC") + " algorithm " + std::to_string(p.algo[l][i])) +
             " (cuDNN NHWC " + std::to_string(p.cudnn_ms[0][i]) + " ms, NCHW " + std::to_string(p.cudnn_ms[1][i]) +
             " ms, im2col " + std::to_string(p.im2col_ms[i]) + " ms)\n";
    }
  }
  return out;
}

/// The fastest algorithm among cuDNN's timed results (sorted fastest first) for one layout and
/// pass: deterministic unless allow_nondeterministic_cudnn(true); for float, tensor-core (TF32)
/// arithmetic only where allowed. -1 when none succeeded.
template <class Perf>
void keep_fastest(const Perf* results, int count, bool tensor_ops, bool any_determinism, plan& p, int l, int slot) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || (!any_determinism && r.determinism != CUDNN_DETERMINISTIC)) continue;
    if (!tensor_ops && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    p.algo[l][slot] = int(r.algo);
    p.workspace[l][slot] = r.memory;
    p.cudnn_ms[l][slot] = r.time;
    return;
  }
  p.algo[l][slot] = -1;
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

/// A pass's operands as cuDNN reads and writes them in one layout. NHWC reads the activations as
/// they are and the filter as (out_c, h, w, in_c); NCHW reads converted copies. forward: a = x,
/// b = w, out = y; input_gradient: a = dy, b = w, out = dx; filter_gradient: a = x, b = dy,
/// out = dw. `in` fills what cuDNN reads, `result` is where it writes, and `back` moves the result
/// to fluxion's layout in `out` (the NHWC forward and input gradient write `out` itself).
template <class T>
struct staging {
  const plan& p;
  const descriptors& d;
  pass which;
  const kernels::conv2d_shape& s;
  const char* op;
  bool nchw;
  device_scratch<T> a_copy, b_copy, filter, filter_copy, staged;
  const T* a_in = nullptr;
  const T* b_in = nullptr;
  T* result = nullptr;

  staging(const plan& p_, layout l, pass which_, const kernels::conv2d_shape& s_, const char* op_)
      : p(p_),
        d(p_.d[int(l)]),
        which(which_),
        s(s_),
        op(op_),
        nchw(l == layout::nchw),
        a_copy(nchw ? (which == pass::input_gradient ? s.output_size() : s.input_size()) : 0),
        b_copy(nchw && which == pass::filter_gradient ? s.output_size() : 0),
        filter(which == pass::filter_gradient ? 0 : s.filter_size()),
        filter_copy(nchw ? s.filter_size() : 0),
        staged(nchw || which == pass::filter_gradient
                   ? (which == pass::forward          ? s.output_size()
                      : which == pass::input_gradient ? s.input_size()
                                                      : s.filter_size())
                   : 0) {}

  /// to = from, converted between the layouts their descriptors name.
  void convert(cudnnTensorDescriptor_t from_desc, const T* from, cudnnTensorDescriptor_t to_desc, T* to) const {
    const T one = 1, zero = 0;
    check(cudnnTransformTensor(handle(), &one, from_desc, from, &zero, to_desc, to), op, "cudnnTransformTensor", s);
  }

  void in(const T* a, const T* b, T* out) {
    const descriptors& own = p.d[0];  // fluxion's layout
    a_in = a;
    if (nchw) {
      if (which == pass::input_gradient)
        convert(own.y, a, d.y, a_copy.data());
      else
        convert(own.x, a, d.x, a_copy.data());
      a_in = a_copy.data();
    }
    if (which == pass::filter_gradient) {
      b_in = b;
      if (nchw) {
        convert(own.y, b, d.y, b_copy.data());
        b_in = b_copy.data();
      }
    } else {
      transpose_filter(s, b, filter.data(), true);
      b_in = filter.data();
      if (nchw) {
        convert(own.filter_tensor, filter.data(), d.filter_tensor, filter_copy.data());
        b_in = filter_copy.data();
      }
    }
    result = nchw || which == pass::filter_gradient ? staged.data() : out;
  }

  void back(T* out) {
    const descriptors& own = p.d[0];
    switch (which) {
      case pass::forward:
        if (nchw) convert(d.y, result, own.y, out);
        break;
      case pass::input_gradient:
        if (nchw) convert(d.x, result, own.x, out);
        break;
      case pass::filter_gradient:
        if (nchw) {  // (out_c, in_c, h, w) -> (out_c, h, w, in_c), then to HWIO
          convert(d.filter_tensor, result, own.filter_tensor, filter_copy.data());
          transpose_filter(s, filter_copy.data(), out, false);
        } else {
          transpose_filter(s, result, out, false);
        }
        break;
    }
  }
};

/// cuDNN's call for pass `which` in the layout of `d`, on staged operands.
template <class T>
cudnnStatus_t call(const plan& p, const descriptors& d, pass which, int algo, void* ws, std::size_t ws_bytes,
                   const T* a, const T* b, T* out) {
  const T one = 1, zero = 0;
  cudnnHandle_t h = handle();
  switch (which) {
    case pass::forward:
      return cudnnConvolutionForward(h, &one, d.x, a, d.w, b, p.conv, cudnnConvolutionFwdAlgo_t(algo), ws, ws_bytes,
                                     &zero, d.y, out);
    case pass::input_gradient:
      return cudnnConvolutionBackwardData(h, &one, d.w, b, d.y, a, p.conv, cudnnConvolutionBwdDataAlgo_t(algo), ws,
                                          ws_bytes, &zero, d.x, out);
    default:
      return cudnnConvolutionBackwardFilter(h, &one, d.x, a, d.y, b, p.conv, cudnnConvolutionBwdFilterAlgo_t(algo),
                                            ws, ws_bytes, &zero, d.w, out);
  }
}

inline const char* call_name(pass which) {
  return which == pass::forward          ? "cudnnConvolutionForward"
         : which == pass::input_gradient ? "cudnnConvolutionBackwardData"
                                         : "cudnnConvolutionBackwardFilter";
}

/// One pass through the algorithm kept for layout l: the operands converted in, cuDNN's call, the
/// result converted back.
template <class T>
void run_cudnn(const plan& p, layout l, pass which, const kernels::conv2d_shape& s, const T* a, const T* b, T* out,
               const char* op) {
  const int slot = int(which);
  staging<T> st(p, l, which, s, op);
  st.in(a, b, out);
  device_scratch<unsigned char> ws{index_t(p.workspace[int(l)][slot])};
  check(call(p, st.d, which, p.algo[int(l)][slot], ws.data(), p.workspace[int(l)][slot], st.a_in, st.b_in, st.result),
        op, call_name(which), s);
  st.back(out);
}

/// cuDNN's algorithm search for one pass in layout l, on the staged operands: keeps the fastest
/// allowed algorithm in p.
template <class T>
void search(plan& p, layout l, pass which, const kernels::conv2d_shape& s, const T* a, const T* b, T* out,
            const search_workspace& ws, const char* op) {
  const int slot = int(which);
  staging<T> st(p, l, which, s, op);
  st.in(a, b, out);
  const descriptors& d = st.d;
  const bool tensor_ops = tf32_allowed();
  cudnnHandle_t h = handle();
  int found = 0;
  if (which == pass::forward) {
    cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    check(cudnnFindConvolutionForwardAlgorithmEx(h, d.x, st.a_in, d.w, st.b_in, p.conv, d.y, st.result,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, r, ws.data, ws.bytes),
          op, "cudnnFindConvolutionForwardAlgorithmEx", s);
    keep_fastest(r, found, tensor_ops, p.any_determinism, p, int(l), slot);
  } else if (which == pass::input_gradient) {
    cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    check(cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, st.b_in, d.y, st.a_in, p.conv, d.x, st.result,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, r, ws.data,
                                                      ws.bytes),
          op, "cudnnFindConvolutionBackwardDataAlgorithmEx", s);
    keep_fastest(r, found, tensor_ops, p.any_determinism, p, int(l), slot);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    check(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, st.a_in, d.y, st.b_in, p.conv, d.w, st.result,
                                                        CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, r, ws.data,
                                                        ws.bytes),
          op, "cudnnFindConvolutionBackwardFilterAlgorithmEx", s);
    keep_fastest(r, found, tensor_ops, p.any_determinism, p, int(l), slot);
  }
}

/// A pass's first call in this thread: cuDNN's search in each allowed layout, then each layout's
/// kept algorithm and im2col timed as they run here (conversions, transposes and workspaces
/// included), and the fastest route kept. With cudnn_always() (tests), the first layout that has
/// an algorithm, untimed.
template <class T, class Im2col>
void decide(plan& p, pass which, const kernels::conv2d_shape& s, const T* a, const T* b, T* out,
            const Im2col& im2col, const char* op) {
  const int slot = int(which);
  const bool allowed[2] = {p.layouts != 2, p.layouts != 1};
  {
    search_workspace ws;
    for (int l = 0; l < 2; ++l)
      if (allowed[l]) search(p, layout(l), which, s, a, b, out, ws, op);
  }
  route best = route::im2col;
  if (cudnn_always()) {
    for (int l = 1; l >= 0; --l)
      if (allowed[l] && p.algo[l][slot] >= 0) best = l ? route::cudnn_nchw : route::cudnn_nhwc;
  } else if ((allowed[0] && p.algo[0][slot] >= 0) || (allowed[1] && p.algo[1][slot] >= 0)) {
    float best_ms = p.im2col_ms[slot] = device_ms(im2col);
    for (int l = 0; l < 2; ++l) {
      if (!allowed[l] || p.algo[l][slot] < 0) continue;
      p.cudnn_ms[l][slot] = device_ms([&] { run_cudnn(p, layout(l), which, s, a, b, out, op); });
      if (p.cudnn_ms[l][slot] < best_ms) {
        best_ms = p.cudnn_ms[l][slot];
        best = l ? route::cudnn_nchw : route::cudnn_nhwc;
      }
    }
  }
  p.routes[slot] = best;
}

/// Runs one pass of a float convolution through cuDNN where that is this geometry's route, and
/// returns false where it is not (the caller runs `im2col`, the same pass as im2col + cuBLAS).
/// forward: a = x, b = w, out = y; input_gradient: a = dy, b = w, out = dx; filter_gradient: a = x,
/// b = dy, out = dw. A pass's first call decides its route (decide).
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
    if (p.routes[slot] == route::undecided) decide(p, which, s, a, b, out, im2col, op);
    if (p.routes[slot] == route::im2col) return false;
    const layout l = p.routes[slot] == route::cudnn_nchw ? layout::nchw : layout::nhwc;
    run_cudnn(p, l, which, s, a, b, out, op);
    ++cudnn_passes();
    if (l == layout::nchw) ++cudnn_nchw_passes();
    return true;
  }
}

}  // namespace fluxion::detail::cudnn
#endif
