// Prebuilt statements of the model layer: the float statements of dense, conv2d (with every
// activation layer fused in), pooling, dropout, permute, batch_norm and layer_norm (with nothing
// or a relu after them), group_norm and LSTM layers (also with initial and final states,
// call_with_state: 2-3 CPU s of library that save a program using it about 12), sparse softmax
// cross-entropy, the losses' sample weights and masks, reduce_logsumexp, softmax, the optimizers' update,
// the tape's sum of gradients, the layers' initializers and activity_regularization's penalty
// (stop 83), compiled once in src/nn_kernels.cpp
// instead of in every translation unit of a program that uses them.
//
//   fluxion_target_prebuilt_kernels(app)     # CMake (cmake/build_time.cmake): both kernel sources
//
// With FLUXION_PREBUILT_KERNELS (and the default autodiff settings, which nn_kernels.cpp is built
// with), these specializations are `extern template`: a program's layers then compile to calls,
// and the fused kernels and backward functions behind them come from the library. Each function
// names the autodiff settings in its template arguments (Config), so a program built with other
// settings instantiates its own instead of linking code that records differently. Included by
// <fluxion/fluxion.hpp>.
#pragma once

#include "../losses.hpp"
#include "../nn.hpp"
#include "../optim.hpp"

#if (defined(FLUXION_PREBUILT_KERNELS) || defined(FLUXION_PREBUILT_NN_SOURCE)) && \
    FLUXION_MAX_DERIVATIVE_ORDER == 1 && !FLUXION_FORWARD_MODE

#define FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, E)                                                             \
  EXTERN template tensor<float> nn::detail::dense_forward<float, E>(const tensor<float>&, const variable<float>&, \
                                                                    const variable<float>&, const E&);             \
  EXTERN template tensor<float> nn::detail::conv2d_forward<float, E>(const tensor<float>&, const variable<float>&, \
                                                                     const variable<float>&, spatial2d, padding,    \
                                                                     spatial2d, const E&);

// batch_norm's and layer_norm's statements with the activation that follows them (stop 77).
#define FLUXION_NN_NORM_SPECIALIZATIONS(EXTERN, E)                                                                \
  EXTERN template tensor<float> nn::detail::batch_normalize<float, cpu, E>(                                      \
      const tensor<float>&, int, bool, bool, variable<float>&, variable<float>&, variable<float>&,               \
      variable<float>&, float, float, const E&);                                                                  \
  EXTERN template tensor<float> nn::detail::layer_normalize<float, cpu, E>(const tensor<float>&, variable<float>&, \
                                                                         variable<float>&, float, bool, const E&);

// A recurrent layer's statements (nn::detail::NAME_forward, STATES states) for each
// ReturnSequences, State (call_with_state) and Masked (Keras's mask).
#define FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, ...)                                                   \
  EXTERN template nn::detail::recurrent_result<float, cpu, STATES> nn::detail::NAME##_forward<float, __VA_ARGS__>( \
      const tensor<float>&, const variable<float>&, const variable<float>&, const variable<float>&, index_t,       \
      const std::array<tensor<float>, STATES>*, const tensor<float>*, const tensor<float>*, nn::rnn_activation);
#define FLUXION_NN_RECURRENT_SPECIALIZATIONS(EXTERN, NAME, STATES)                \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, false, false, false)          \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, false, false, true)           \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, false, true, false)           \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, false, true, true)            \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, true, false, false)           \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, true, false, true)            \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, true, true, false)            \
  FLUXION_NN_RECURRENT_FORWARD(EXTERN, NAME, STATES, true, true, true)

#define FLUXION_NN_SPECIALIZATIONS(EXTERN)                                                                          \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::detail::identity)                                                \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::relu)                                                            \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::sigmoid)                                                         \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::tanh)                                                            \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::gelu)                                                            \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::softmax)                                                         \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::log_softmax)                                                     \
  EXTERN template tensor<float> nn::detail::pool_forward<true, float>(const tensor<float>&, spatial2d, spatial2d,  \
                                                                      padding);                                    \
  EXTERN template tensor<float> nn::detail::pool_forward<false, float>(const tensor<float>&, spatial2d, spatial2d, \
                                                                       padding);                                   \
  EXTERN template tensor<float> nn::detail::dropout_forward<float>(const tensor<float>&, double, random::generator&); \
  EXTERN template tensor<float> nn::detail::permute_forward<float>(const tensor<float>&, std::vector<int>);          \
  EXTERN template tensor<float> nn::detail::group_normalize<float, cpu>(const tensor<float>&, variable<float>&,     \
                                                                        variable<float>&, index_t, float, bool);  \
  FLUXION_NN_NORM_SPECIALIZATIONS(EXTERN, nn::detail::identity)                                                   \
  FLUXION_NN_NORM_SPECIALIZATIONS(EXTERN, nn::relu)                                                               \
  FLUXION_NN_RECURRENT_SPECIALIZATIONS(EXTERN, lstm, 2)                                                           \
  EXTERN template tensor<float> nn::detail::recurrent_input<float>(tensor<float>, const nn::recurrent_options&,     \
                                                                   const nn::detail::dropout_stream&, bool);        \
  EXTERN template tensor<float> nn::detail::recurrent_keep<float>(const tensor<bool>&, bool);                       \
  EXTERN template tensor<float> nn::detail::recurrent_state_keep<float>(index_t, index_t, double,                  \
                                                                         const nn::detail::dropout_stream&);        \
  EXTERN template tensor<float> losses::detail::sparse_softmax_cross_entropy_tensors<float, std::int32_t>(         \
      const tensor<float>&, tensor<std::int32_t>, losses::reduction, double);                                      \
  EXTERN template tensor<float> losses::detail::sparse_softmax_cross_entropy_tensors<float, std::int64_t>(         \
      const tensor<float>&, tensor<std::int64_t>, losses::reduction, double);                                      \
  EXTERN template tensor<float> losses::detail::reduce_weighted_tensors<float, bool>(                              \
      const char*, const tensor<float>&, const tensor<bool>&, losses::reduction);                                  \
  EXTERN template tensor<float> losses::detail::reduce_weighted_tensors<float, float>(                             \
      const char*, const tensor<float>&, const tensor<float>&, losses::reduction);                                 \
  EXTERN template tensor<float> fluxion::detail::logsumexp_of<float, cpu>(const tensor<float>&, unsigned, bool);     \
  EXTERN template tensor<float> fluxion::detail::softmax_of<float, cpu>(const tensor<float>&, int);                  \
  EXTERN template tensor<float> fluxion::detail::norm_of<float, cpu>(const tensor<float>&, double, unsigned, bool); \
  EXTERN template void autodiff::gradient_store::add<1, float, cpu>(std::uint64_t, tensor<float, cpu>);              \
  EXTERN template std::vector<tensor<float, cpu>> gradient_tape::gradient<float, cpu, variable<float, cpu>>(          \
      const tensor<float, cpu>&, const std::vector<const variable<float, cpu>*>&, const tensor<float, cpu>*,         \
      unconnected_gradients, const std::vector<tensor<float, cpu>>*);                                                \
  EXTERN template std::vector<tensor<float, cpu>> gradient_tape::gradient<float, cpu, tensor<float, cpu>>(            \
      const tensor<float, cpu>&, const std::vector<const tensor<float, cpu>*>&, const tensor<float, cpu>*,           \
      unconnected_gradients, const std::vector<tensor<float, cpu>>*);                                                \
  EXTERN template tensor<float> nn::initializers::orthogonal<float>(const shape&, random::generator&, double);        \
  EXTERN template tensor<float> nn::detail::activity_penalty<float, cpu>(const tensor<float>&, double, double);      \
  EXTERN template tensor<float> nn::initializer::operator()<float>(const shape&, random::generator&) const;          \
  EXTERN template tensor<float> nn::detail::with_penalties<float, cpu>(tensor<float>, const std::vector<variable<float, cpu>*>&); \
  EXTERN template void nn::detail::add_penalty_gradients<float, cpu>(std::vector<tensor<float>>&,                    \
                                                                     const std::vector<variable<float, cpu>*>&);      \
  EXTERN template void optim::optimizer::apply_gradients<float, cpu>(const std::vector<tensor<float, cpu>>&,       \
                                                                     const std::vector<variable<float, cpu>*>&);  \
  /* apply_gradients is inline (defined in its class), so g++ inlines it and would instantiate its  */        \
  /* body, apply_checked, in the program: the body is declared extern too (since stop 73 moved it). */        \
  EXTERN template void optim::optimizer::apply_checked<float, cpu>(const std::vector<tensor<float, cpu>>&,         \
                                                                   const std::vector<variable<float, cpu>*>&);    \
  EXTERN template void optim::detail::apply_constraint<float, cpu>(variable<float, cpu>&);

// Keras's other activations after a dense or conv2d layer (stop 41), compiled in a source of their
// own (src/nn_activation_kernels.cpp) that the library holds only on request
// (fluxion_target_prebuilt_kernels(app ACTIVATIONS), which defines FLUXION_PREBUILT_ACTIVATIONS):
// it costs 13 CPU s, a quarter more library, which every first build would pay otherwise. Without
// it a program instantiates these statements itself (about 2 CPU s for the first it uses).
#define FLUXION_NN_ACTIVATION_SPECIALIZATIONS(EXTERN)                  \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::elu)                 \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::selu)                \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::leaky_relu)          \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::relu6)               \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::silu)                \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::softplus)            \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::softsign)            \
  FLUXION_NN_EPILOGUE_SPECIALIZATIONS(EXTERN, nn::mish)

// nn::gru's statements and fused cells (stop 42), likewise in a source of their own
// (src/nn_gru_kernels.cpp), which fluxion_target_prebuilt_kernels puts in the library and declares
// with FLUXION_PREBUILT_GRU by default since stop 53 (until then only on request, `GRU`; a newcomer's
// program with a GRU, bench/compile/newcomer_gru.cpp, compiled 44-46 s per edit without them and 24 s
// with them, 2 cores, AVX2):
// `NO_GRU` leaves out these 14 CPU s of library, and a program with a GRU then compiles them itself
// (bench/compile/recurrent.cpp with prebuilt kernels: 15.7 CPU s without them, 6.0 with).
#define FLUXION_NN_GRU_SPECIALIZATIONS(EXTERN)                                                                    \
  FLUXION_NN_RECURRENT_SPECIALIZATIONS(EXTERN, gru, 1)

// nn::simple_rnn's statements and fused cell (stop 84), in a source of their own
// (src/nn_simple_rnn_kernels.cpp) that the library holds only on request, as the activations'
// (fluxion_target_prebuilt_kernels(app SIMPLE_RNN), which defines FLUXION_PREBUILT_SIMPLE_RNN): a
// program with a SimpleRNN and prebuilt kernels otherwise compiles them itself
// (bench/compile/recurrent.cpp, bench/RESULTS-compile.md, stop 84).
#define FLUXION_NN_SIMPLE_RNN_SPECIALIZATIONS(EXTERN)                                                             \
  FLUXION_NN_RECURRENT_SPECIALIZATIONS(EXTERN, simple_rnn, 1)

namespace fluxion {
#if defined(FLUXION_PREBUILT_NN_SOURCE)
FLUXION_NN_SPECIALIZATIONS()
#else
FLUXION_NN_SPECIALIZATIONS(extern)
#endif
#if defined(FLUXION_PREBUILT_NN_ACTIVATION_SOURCE)
FLUXION_NN_ACTIVATION_SPECIALIZATIONS()
#elif defined(FLUXION_PREBUILT_ACTIVATIONS)
FLUXION_NN_ACTIVATION_SPECIALIZATIONS(extern)
#endif
#if defined(FLUXION_PREBUILT_NN_GRU_SOURCE)
FLUXION_NN_GRU_SPECIALIZATIONS()
#elif defined(FLUXION_PREBUILT_GRU)
FLUXION_NN_GRU_SPECIALIZATIONS(extern)
#endif
#if defined(FLUXION_PREBUILT_NN_SIMPLE_RNN_SOURCE)
FLUXION_NN_SIMPLE_RNN_SPECIALIZATIONS()
#elif defined(FLUXION_PREBUILT_SIMPLE_RNN)
FLUXION_NN_SIMPLE_RNN_SPECIALIZATIONS(extern)
#endif
}  // namespace fluxion

#undef FLUXION_NN_SIMPLE_RNN_SPECIALIZATIONS
#undef FLUXION_NN_GRU_SPECIALIZATIONS
#undef FLUXION_NN_ACTIVATION_SPECIALIZATIONS
#undef FLUXION_NN_SPECIALIZATIONS
#undef FLUXION_NN_EPILOGUE_SPECIALIZATIONS
#undef FLUXION_NN_NORM_SPECIALIZATIONS

#endif

// The optimizers' per-element loops on the cpu, for float and double: every variant of every
// optimizer's step. They record nothing, so they are prebuilt whatever the autodiff settings. A
// program that constructs an optimizer otherwise compiles all of its variants for both element
// types (its update functions are virtual, so the vtable names them all).
#if defined(FLUXION_PREBUILT_KERNELS) || defined(FLUXION_PREBUILT_NN_SOURCE)

#define FLUXION_OPTIM_UPDATE(EXTERN, SLOTS, T, ...)                                                           \
  EXTERN template void optim::detail::host_fused_update<SLOTS, T, __VA_ARGS__>(                                \
      const optim::detail::update_buffers<T>&, const optim::detail::step_constants&, const __VA_ARGS__&);
#define FLUXION_OPTIM_UPDATES(EXTERN, T)                                                                      \
  FLUXION_OPTIM_UPDATE(EXTERN, 0, T, optim::sgd::step<T, 0>)                                                  \
  FLUXION_OPTIM_UPDATE(EXTERN, 1, T, optim::sgd::step<T, 1>)                                                  \
  FLUXION_OPTIM_UPDATE(EXTERN, 1, T, optim::sgd::step<T, 2>)                                                  \
  FLUXION_OPTIM_UPDATE(EXTERN, 1, T, optim::adagrad::step<T>)                                                 \
  FLUXION_OPTIM_UPDATE(EXTERN, 1, T, optim::rmsprop::step<false, false, T>)                                   \
  FLUXION_OPTIM_UPDATE(EXTERN, 2, T, optim::rmsprop::step<true, false, T>)                                    \
  FLUXION_OPTIM_UPDATE(EXTERN, 2, T, optim::rmsprop::step<false, true, T>)                                    \
  FLUXION_OPTIM_UPDATE(EXTERN, 3, T, optim::rmsprop::step<true, true, T>)                                     \
  FLUXION_OPTIM_UPDATE(EXTERN, 2, T, optim::adam::step<T>)                                                    \
  FLUXION_OPTIM_UPDATE(EXTERN, 3, T, optim::adam::step<T>)                                                    \
  FLUXION_OPTIM_UPDATE(EXTERN, 2, T, optim::adamax::step<T>)                                                  \
  FLUXION_OPTIM_UPDATE(EXTERN, 2, T, optim::nadam::step<T>)                                                   \
  FLUXION_OPTIM_UPDATE(EXTERN, 2, T, optim::adadelta::step<T>)                                                \
  FLUXION_OPTIM_UPDATE(EXTERN, 1, T, optim::lion::step<T>)                                                    \
  FLUXION_OPTIM_UPDATE(EXTERN, 0, T, optim::detail::ema_step<T>)                                              \
  FLUXION_OPTIM_UPDATE(EXTERN, 0, T, optim::detail::accumulate_step<T>)                                       \
  FLUXION_OPTIM_UPDATE(EXTERN, 1, T, optim::detail::average_accumulated_step<T>)

namespace fluxion {
#if defined(FLUXION_PREBUILT_NN_SOURCE)
FLUXION_OPTIM_UPDATES(, float)
FLUXION_OPTIM_UPDATES(, double)
#else
FLUXION_OPTIM_UPDATES(extern, float)
FLUXION_OPTIM_UPDATES(extern, double)
#endif
}  // namespace fluxion

#undef FLUXION_OPTIM_UPDATES
#undef FLUXION_OPTIM_UPDATE

#endif
