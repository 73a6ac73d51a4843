// Prebuilt CPU kernels: the GEMM, convolution (dense and depthwise) and pooling kernels of float and double, compiled
// once in src/kernels.cpp instead of in every translation unit that uses them.
//
//   fluxion_target_prebuilt_kernels(app)     # CMake (cmake/build_time.cmake), or by hand:
//   g++ -march=native -DFLUXION_PREBUILT_KERNELS app.cpp fluxion/src/kernels.cpp
//
// With FLUXION_PREBUILT_KERNELS defined, these specializations are `extern template`: a program
// that calls matmul or conv2d then skips about a fifth of its code generation (the packed GEMM
// alone is some 120 KB of machine code), and links them from kernels.cpp. Compile kernels.cpp
// with the same -march as the program, or the kernels run with the other's vector width. Without
// the macro nothing changes: fluxion stays header-only.
#pragma once

#include "conv.hpp"
#include "depthwise_conv.hpp"
#include "gemm.hpp"
#include "matmul.hpp"
#include "pool.hpp"

#if defined(FLUXION_PREBUILT_KERNELS) || defined(FLUXION_PREBUILT_KERNELS_SOURCE)

// FLUXION_KERNEL_SPECIALIZATIONS(extern, float) declares; (, float) defines (in kernels.cpp).
#define FLUXION_KERNEL_SPECIALIZATIONS(EXTERN, T)                                                            \
  EXTERN template void kernels::gemm<T>(kernels::transpose, kernels::transpose, index_t, index_t, index_t, T,  \
                                        const T*, index_t, const T*, index_t, T, T*, index_t,                 \
                                        const kernels::gemm_epilogue<T>&);                                    \
  EXTERN template void kernels::gemm_strided_batched<T>(                                                       \
      kernels::transpose, kernels::transpose, index_t, index_t, index_t, T, const T*, index_t, index_t,         \
      const T*, index_t, index_t, T, T*, index_t, index_t, index_t, const kernels::gemm_epilogue<T>&);        \
  EXTERN template void cpu_kernel::matmul_batched<T>(bool, bool, index_t, index_t, index_t, index_t, const T*, \
                                                     const index_t*, const T*, const index_t*, T*);           \
  EXTERN template void kernels::conv2d_forward<T>(const kernels::conv2d_shape&, const T*, const T*, T*,        \
                                                  const kernels::gemm_epilogue<T>&);                          \
  EXTERN template void kernels::conv2d_forward_reused_filter<T>(const kernels::conv2d_shape&, const T*, const T*,   \
                                                                std::uint64_t, T*, const kernels::gemm_epilogue<T>&); \
  EXTERN template void kernels::conv2d_backward_input<T>(const kernels::conv2d_shape&, const T*, const T*, T*); \
  EXTERN template void kernels::conv2d_backward_filter<T>(const kernels::conv2d_shape&, const T*, const T*, T*); \
  EXTERN template void kernels::depthwise_conv2d_forward<T>(const kernels::depthwise2d_shape&, const T*, const T*, \
                                                            T*);                                             \
  EXTERN template void kernels::depthwise_conv2d_backward_input<T>(const kernels::depthwise2d_shape&, const T*,   \
                                                                   const T*, T*);                             \
  EXTERN template void kernels::depthwise_conv2d_backward_filter<T>(const kernels::depthwise2d_shape&, const T*,  \
                                                                    const T*, T*);                            \
  EXTERN template void kernels::max_pool2d_forward<T>(const kernels::pool2d_shape&, const T*, T*);             \
  EXTERN template void kernels::max_pool2d_backward<T>(const kernels::pool2d_shape&, const T*, const T*, T*);  \
  EXTERN template void kernels::avg_pool2d_forward<T>(const kernels::pool2d_shape&, const T*, T*);             \
  EXTERN template void kernels::avg_pool2d_backward<T>(const kernels::pool2d_shape&, const T*, T*);

// The fused statements that every program of element type T runs whatever its expressions: copies
// and fills (a leaf or a scalar into a buffer), the sum of two tensors (the tape adds gradients
// with it) and the sum of a tensor over axes (gradients reduced to a leaf's shape). The random
// draws are prebuilt in tensor/random.hpp.
#define FLUXION_STATEMENT_SPECIALIZATIONS(EXTERN, T)                                                          \
  EXTERN template void evaluator<cpu>::assign<T, leaf_view<T>>(T*, const leaf_layout&, const leaf_view<T>&,    \
                                                               const shape&);                                \
  EXTERN template void evaluator<cpu>::assign<T, scalar_view<T>>(T*, const leaf_layout&, const scalar_view<T>&, \
                                                                 const shape&);                              \
  EXTERN template void evaluator<cpu>::assign<T, binary_view<ops::add, leaf_view<T>, leaf_view<T>>>(           \
      T*, const leaf_layout&, const binary_view<ops::add, leaf_view<T>, leaf_view<T>>&, const shape&);         \
  EXTERN template void evaluator<cpu>::reduce<ops::reduce_sum, T, leaf_view<T>>(T*, const leaf_view<T>&,       \
                                                                                const shape&, unsigned);

namespace fluxion::detail {
#if defined(FLUXION_PREBUILT_KERNELS_SOURCE)
FLUXION_KERNEL_SPECIALIZATIONS(, float)
FLUXION_KERNEL_SPECIALIZATIONS(, double)
FLUXION_STATEMENT_SPECIALIZATIONS(, float)
FLUXION_STATEMENT_SPECIALIZATIONS(, double)
#else
FLUXION_KERNEL_SPECIALIZATIONS(extern, float)
FLUXION_KERNEL_SPECIALIZATIONS(extern, double)
FLUXION_STATEMENT_SPECIALIZATIONS(extern, float)
FLUXION_STATEMENT_SPECIALIZATIONS(extern, double)
#endif
}  // namespace fluxion::detail

#undef FLUXION_KERNEL_SPECIALIZATIONS
#undef FLUXION_STATEMENT_SPECIALIZATIONS

#endif
