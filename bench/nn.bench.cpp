// Model-layer benchmarks against LibTorch, in one run (issue 11):
//
//   train_mlp    784-256-256-10 MLP, relu                                     batch 64, Adam
//   train_cnn    the TF tutorial's 2-conv net: conv 32 5x5 same relu, pool 2, conv 64 5x5 same
//                relu, pool 2, dense 1024 relu, dense 10 (no dropout)         batch 64, Adam
//   train_lstm   the seed's CNN+LSTM (MNIST_HighLevel): conv 32 5x5, pool, conv 64 5x5, pool,
//                (49, 64) -> transpose -> LSTM 128 -> dense 10               batch 64, Adam
//   infer_mlp, infer_cnn   the MLP and the CNN in inference, batch 1 (latency)
//   train_*_compiled       the MLP's and the CNN's steps as one nn::compiled_step (no tape)
//   train_mlp_activity     the MLP with Keras's ActivityRegularization (L1 1e-5) after each hidden
//                          relu, by a tape (the call, then loss + regularization_loss()) and by
//                          nn::compile_step; LibTorch's step adds 1e-5 sum|h| of each (stop 83)
//   train_*_floor          only the GEMMs, convolution kernels and Adam update of the MLP's and
//                          the CNN's steps: the floor under any step built from these kernels,
//                          however fused (issue 13's compiled step)
//   train_*_split          the MLP's and the CNN's steps data-parallel: half the batch on each of
//                          the pool's two threads, gradients averaged (issue 13)
//   global_{avg,max}_pool  a ResNet head's global pooling, (64, 7, 7, 512) -> (64, 512), forward
//                          and backward (the gradient of sum(y * w) with respect to x): fluxion's
//                          nn::global_avg_pool2d / global_max_pool2d under a tape, LibTorch's
//                          mean / amax over dims (2, 3) of NCHW (its layout, as a ResNet's
//                          adaptive_avg_pool2d) and over dims (1, 2) of NHWC (fluxion's), autograd
//   rnn_{gru,lstm,simple_rnn}  a recurrent layer alone, (64, 32, 64) -> GRU, LSTM or SimpleRNN 128
//                          -> the last state, forward and backward (the gradients of sum(h * w)
//                          with respect to the input and every weight): fluxion's nn::gru /
//                          nn::lstm / nn::simple_rnn under a tape (the fused cells), LibTorch's
//                          torch::nn::GRU / LSTM / RNN (tanh; batch_first) with the same weights,
//                          autograd; the LibTorch case first checks that both give the same output
//   rnn_simple_rnn_relu    the SimpleRNN case with activation relu (LibTorch's nonlinearity kReLU)
//   rnn_{gru,lstm,simple_rnn}_masked  the same with Keras's mask: right padding, each example of a random
//                          length in [1, 32] (seed 8): fluxion's call(x, {.mask}) (the fused cells
//                          skip the padding steps), LibTorch's pack_padded_sequence
//                          (enforce_sorted = false) and its final state h_n; the LibTorch case
//                          first checks that both give the same output
//   rnn_lstm_recurrent_dropout  the LSTM case in training with Keras's recurrent_dropout 0.2 (the
//                          layer's step statements), against rnn_lstm_training (the same in
//                          training without it: the fused cells); fluxion only (LibTorch's LSTM has
//                          no recurrent dropout)
//   attention              a Transformer block's self-attention, (32, 64, 128) -> 8 heads of 16 ->
//                          (32, 64, 128), forward and backward (the input's and every weight's
//                          gradients of sum(y * w)): fluxion's nn::multi_head_attention under a
//                          tape, LibTorch's MultiheadAttention ((time, batch, e) layout) with the same
//                          weights, autograd
//   batch_norm             a small CNN's batch normalization, (64, 28, 28, 32), a training call
//                          and its backward pass (input, gamma and beta gradients of sum(y * w)),
//                          and inference alone (batch_norm_inference_*): fluxion's nn::batch_norm<>
//                          under a tape, LibTorch's BatchNorm2d (NCHW and channels_last) with the
//                          same gamma and beta; the LibTorch case first checks the same output;
//                          batch_norm_relu_*: the training call with a relu after it (fluxion's
//                          layer epilogue, as a sequential model passes it; torch::relu)
//   layer_norm             a transformer block's layer normalization, 4096 tokens of 256 features
//                          ((16, 16, 16, 256)), a call and its backward pass (input, gamma and beta
//                          gradients of sum(y * w)), and the call alone (layer_norm_forward_*):
//                          fluxion's nn::layer_norm<> under a tape, LibTorch's LayerNorm({256}) with
//                          the same gamma and beta; the LibTorch case first checks the same output;
//                          layer_norm_relu_*: the call with a relu after it, trained
//   conv_transpose         a generator's upsampling layer, (64, 14, 14, 64) -> conv2d_transpose 32
//                          filters 4x4, stride 2, valid -> (64, 30, 30, 32), forward and backward
//                          (input, kernel and bias gradients of sum(y * w)): fluxion's
//                          nn::conv2d_transpose under a tape, LibTorch's ConvTranspose2d (NCHW,
//                          padding 0: the same output) with the same weights, autograd
//
// A training step is: forward, softmax cross-entropy with integer labels, the gradients of every
// variable, and one Adam update (fluxion: a gradient tape and fx::optim::adam; LibTorch: autograd,
// zero_grad and torch::optim::Adam). Inputs are random images and labels, the same for both. The
// second argument is the thread count given to both libraries; docs/benchmarks.md reports each library at
// its best thread count. Before timing, each training case checks that three steps on one batch
// lower the loss (SkipWithError otherwise), so a step that does nothing cannot look fast.
#include <benchmark/benchmark.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <fluxion/fluxion.hpp>

#include "threads.hpp"

#if FLUXION_BENCH_HAVE_TORCH
#include "torch_models.hpp"
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

constexpr fx::index_t train_batch = 64;


struct batch_data {
  fx::tensor<float> images;   // (batch, 784)
  fx::tensor<std::int32_t> labels;
};

batch_data make_batch(fx::index_t batch) {
  fx::random::generator gen{17};
  return {fx::random::uniform<float>({batch, 784}, gen), fx::random::uniform<std::int32_t>({batch}, gen, 0, 10)};
}

using mlp_t = nn::sequential_t<nn::input<784>, nn::dense<256>, nn::relu, nn::dense<256>, nn::relu, nn::dense<10>>;
using cnn_t = nn::sequential_t<nn::input<28, 28, 1>, nn::conv2d<32, 5, nn::same>, nn::relu, nn::max_pool2d<2>,
                               nn::conv2d<64, 5, nn::same>, nn::relu, nn::max_pool2d<2>, nn::flatten,
                               nn::dense<1024>, nn::relu, nn::dense<10>>;
using lstm_t = nn::sequential_t<nn::input<28, 28, 1>, nn::conv2d<32, 5, nn::same>, nn::max_pool2d<2, 2, nn::same>,
                                nn::conv2d<64, 5, nn::same>, nn::max_pool2d<2, 2, nn::same>, nn::reshape<49, 64>,
                                nn::permute<2, 1>, nn::lstm<128>, nn::dense<10>>;

/// Three steps that must lower the loss (else the case is skipped with `failure`), then the timed
/// steps: every training-step case of this file, fluxion's and LibTorch's.
template <class Step>
void time_steps(benchmark::State& state, Step&& step, const char* failure) {
  const float first = step();
  step();
  if (!(step() < first)) state.SkipWithError(failure);
  for (auto _ : state) benchmark::DoNotOptimize(step());
}

template <class Model>
float fluxion_step(Model& model, fx::optim::adam& opt, const fx::tensor<float>& x, const fx::tensor<std::int32_t>& y) {
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(model(x, true), y);
  auto vars = model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss.item();
}

/// Times `Compiled` ? one nn::compiled_step : the tape-based step above. The compiled step's
/// numbers are the tape-based step's, bitwise (tests/nn/compiled_step.test.cpp; issue 13).
template <class Model, bool Compiled = false>
void fluxion_train(benchmark::State& state, bool images) {
  set_threads(static_cast<int>(state.range(0)));
  Model model;
  fx::optim::adam opt{1e-3};
  auto compiled = nn::compile_step(model, opt, [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  });
  const batch_data d = make_batch(train_batch);
  const fx::tensor<float> x = images ? fx::tensor<float>(fx::reshape(d.images, {train_batch, 28, 28, 1})) : d.images;
  auto step = [&] {
    if constexpr (Compiled) return compiled(x, d.labels).item();
    else return fluxion_step(model, opt, x, d.labels);
  };
  time_steps(state, step, "fluxion: the loss did not fall");
}

/// The floor under any MLP training step built from these kernels, compiled or not (issue 13): the
/// eight GEMMs a step cannot skip (three forward; every layer's kernel gradient; the input gradients
/// of layers 2 and 3), as the backward rules call them (transposes as GEMM flags), and Adam's
/// update of every variable (gradients made once, before timing). Nothing else: no bias, relu,
/// loss, bias gradients, gradient sums or tape. A step that fused everything else away would still
/// take this long.
void train_mlp_floor(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  mlp_t model;
  fx::optim::adam opt{1e-3};
  auto vars = model.trainable_variables();  // kernel, bias of each dense layer
  fx::random::generator gen{5};
  const batch_data d = make_batch(train_batch);
  std::vector<fx::tensor<float>> grads;
  for (auto* v : vars) grads.push_back(fx::random::normal<float>(v->peek().shape(), gen, 0.f, 1e-3f));
  const fx::tensor<float> dz = fx::random::normal<float>({train_batch, 10}, gen);
  const fx::tensor<float>&W1 = vars[0]->peek(), &W2 = vars[2]->peek(), &W3 = vars[4]->peek();
  for (auto _ : state) {
    const fx::tensor<float> h1 = fx::matmul(d.images, W1), h2 = fx::matmul(h1, W2), z = fx::matmul(h2, W3);
    grads[4] = fx::tensor<float>(fx::matmul(h2, dz, fx::transpose_a));
    const fx::tensor<float> dh2 = fx::matmul(dz, W3, fx::transpose_b);
    grads[2] = fx::tensor<float>(fx::matmul(h1, dh2, fx::transpose_a));
    const fx::tensor<float> dh1 = fx::matmul(dh2, W2, fx::transpose_b);
    grads[0] = fx::tensor<float>(fx::matmul(d.images, dh1, fx::transpose_a));
    opt.apply_gradients(grads, vars);
    benchmark::DoNotOptimize(z.data());
  }
}

/// The same floor for the CNN: the convolution kernels a step cannot skip (both forward; the second
/// layer's input and filter gradients; the first layer's filter gradient), the dense layers' six
/// GEMMs, and Adam's update of every variable. No bias, relu, pooling, loss or tape.
void train_cnn_floor(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  namespace k = fx::detail::kernels;
  cnn_t model;
  fx::optim::adam opt{1e-3};
  auto vars = model.trainable_variables();  // conv1 kernel, bias; conv2 ...; dense1 ...; dense2 ...
  fx::random::generator gen{6};
  std::vector<fx::tensor<float>> grads;
  for (auto* v : vars) grads.push_back(fx::random::normal<float>(v->peek().shape(), gen, 0.f, 1e-3f));
  const fx::tensor<float> x = fx::random::uniform<float>({train_batch, 28, 28, 1}, gen);
  const fx::tensor<float> p1 = fx::random::uniform<float>({train_batch, 14, 14, 32}, gen);  // pool 1's output
  const fx::tensor<float> flat = fx::random::uniform<float>({train_batch, 7 * 7 * 64}, gen);  // pool 2's
  const fx::tensor<float> dz = fx::random::normal<float>({train_batch, 10}, gen);
  const fx::tensor<float> dc2 = fx::random::normal<float>({train_batch, 14, 14, 64}, gen);  // conv 2's output gradient
  const fx::tensor<float> dc1 = fx::random::normal<float>({train_batch, 28, 28, 32}, gen);
  const fx::tensor<float>&K1 = vars[0]->peek(), &K2 = vars[2]->peek(), &W3 = vars[4]->peek(), &W4 = vars[6]->peek();
  const auto s1 = fx::detail::conv2d_geometry_of(x.shape(), K1.shape(), 1, nn::same, 1);
  const auto s2 = fx::detail::conv2d_geometry_of(p1.shape(), K2.shape(), 1, nn::same, 1);
  fx::tensor<float> c1(fx::shape{train_batch, 28, 28, 32}), c2(fx::shape{train_batch, 14, 14, 64}),
      dp1(fx::shape{train_batch, 14, 14, 32});
  for (auto _ : state) {
    k::conv2d_forward<float>(s1, x.data(), K1.data(), c1.mutable_data());
    k::conv2d_forward<float>(s2, p1.data(), K2.data(), c2.mutable_data());
    const fx::tensor<float> h = fx::matmul(flat, W3), z = fx::matmul(h, W4);
    grads[6] = fx::tensor<float>(fx::matmul(h, dz, fx::transpose_a));
    const fx::tensor<float> dh = fx::matmul(dz, W4, fx::transpose_b);
    grads[4] = fx::tensor<float>(fx::matmul(flat, dh, fx::transpose_a));
    const fx::tensor<float> dflat = fx::matmul(dh, W3, fx::transpose_b);
    fx::tensor<float> g2(K2.shape()), g1(K1.shape());
    k::conv2d_backward_input<float>(s2, dc2.data(), K2.data(), dp1.mutable_data());
    k::conv2d_backward_filter<float>(s2, p1.data(), dc2.data(), g2.mutable_data());
    k::conv2d_backward_filter<float>(s1, x.data(), dc1.data(), g1.mutable_data());
    grads[2] = g2;
    grads[0] = g1;
    opt.apply_gradients(grads, vars);
    benchmark::DoNotOptimize(z.data());
    benchmark::DoNotOptimize(dflat.data());
    benchmark::DoNotOptimize(c1.data());
  }
}

/// Data parallelism across the pool's threads, the one lever a compiled step has that a tape-based
/// step has not (issue 13): each of two pool tasks runs a tape-based step on half of the batch (its
/// kernels then run on that task's thread alone), and the two halves' mean gradients are averaged
/// before one Adam update: the full batch's gradient, summed in another order. With one thread the
/// two halves run one after the other.
template <class Model>
void fluxion_train_split(benchmark::State& state, bool images) {
  set_threads(static_cast<int>(state.range(0)));
  Model model;
  fx::optim::adam opt{1e-3};
  const batch_data d = make_batch(train_batch);
  const fx::index_t half = train_batch / 2;
  const fx::tensor<float> x = images ? fx::tensor<float>(fx::reshape(d.images, {train_batch, 28, 28, 1})) : d.images;
  std::vector<fx::index_t> begin(static_cast<std::size_t>(x.shape().rank()), 0), size = x.shape().to_vector();
  size[0] = half;
  std::array<fx::tensor<float>, 2> xs;
  std::array<fx::tensor<std::int32_t>, 2> ys;
  for (fx::index_t h = 0; h < 2; ++h) {
    begin[0] = h * half;
    xs[static_cast<std::size_t>(h)] = fx::slice(x, begin, size);
    ys[static_cast<std::size_t>(h)] = fx::slice(d.labels, {h * half}, {half});
  }
  auto step = [&] {
    auto vars = model.trainable_variables();
    std::array<std::vector<fx::tensor<float>>, 2> grads;
    std::array<float, 2> losses{};
    fx::detail::parallel_for(2, [&](fx::index_t h) {
      const auto i = static_cast<std::size_t>(h);
      fx::gradient_tape tape;
      const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(model(xs[i], true), ys[i]);
      grads[i] = tape.gradient(loss, vars);
      losses[i] = loss.item();
    });
    std::vector<fx::tensor<float>> mean(vars.size());
    for (std::size_t v = 0; v < vars.size(); ++v) mean[v] = 0.5f * (grads[0][v] + grads[1][v]);
    opt.apply_gradients(mean, vars);
    return 0.5f * (losses[0] + losses[1]);
  };
  time_steps(state, step, "fluxion: the loss did not fall");
}

/// Keras's ActivityRegularization (stop 83): the MLP with an L1 penalty of 1e-5 on each hidden
/// layer's activity (after its relu), trained by a tape as a loop of one's own writes it (the call,
/// then the loss plus regularization_loss(), which holds the two penalties) or by nn::compile_step
/// (which recomputes each penalty's layer in its backward pass).
auto activity_mlp() {
  fx::random::generator gen{0};
  return nn::sequential(gen, nn::input<784>{}, nn::dense<256>{}, nn::relu{}, nn::activity_regularization{1e-5},
                        nn::dense<256>{}, nn::relu{}, nn::activity_regularization{1e-5}, nn::dense<10>{});
}
template <bool Compiled>
void train_mlp_activity(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  auto model = activity_mlp();
  fx::optim::adam opt{1e-3};
  auto compiled = nn::compile_step(model, opt, [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  });
  const batch_data d = make_batch(train_batch);
  auto step = [&] {
    if constexpr (Compiled) {
      return compiled(d.images, d.labels).item();
    } else {
      fx::gradient_tape tape;
      const fx::tensor<float> out = model(d.images, true);
      const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(out, d.labels) + model.regularization_loss();
      auto vars = model.trainable_variables();
      opt.apply_gradients(tape.gradient(loss, vars), vars);
      return loss.item();
    }
  };
  step();
  if (model.added_losses().size() != 2) state.SkipWithError("fluxion: the penalties are not in the model's losses");
  time_steps(state, step, "fluxion: the loss did not fall");
}
void train_mlp_activity_fluxion(benchmark::State& s) { train_mlp_activity<false>(s); }
void train_mlp_activity_compiled(benchmark::State& s) { train_mlp_activity<true>(s); }

void train_mlp_fluxion(benchmark::State& s) { fluxion_train<mlp_t>(s, false); }
void train_mlp_split(benchmark::State& s) { fluxion_train_split<mlp_t>(s, false); }
void train_cnn_split(benchmark::State& s) { fluxion_train_split<cnn_t>(s, true); }
void train_mlp_compiled(benchmark::State& s) { fluxion_train<mlp_t, true>(s, false); }
void train_cnn_compiled(benchmark::State& s) { fluxion_train<cnn_t, true>(s, true); }
void train_cnn_fluxion(benchmark::State& s) { fluxion_train<cnn_t>(s, true); }
void train_lstm_fluxion(benchmark::State& s) { fluxion_train<lstm_t>(s, true); }

template <class Model>
void fluxion_infer(benchmark::State& state, bool images) {
  set_threads(static_cast<int>(state.range(0)));
  Model model;
  const batch_data d = make_batch(1);
  const fx::tensor<float> x = images ? fx::tensor<float>(fx::reshape(d.images, {1, 28, 28, 1})) : d.images;
  for (auto _ : state) benchmark::DoNotOptimize(model(x).data());
}
void infer_mlp_fluxion(benchmark::State& s) { fluxion_infer<mlp_t>(s, false); }
void infer_cnn_fluxion(benchmark::State& s) { fluxion_infer<cnn_t>(s, true); }

constexpr fx::index_t pool_batch = 64, pool_hw = 7, pool_channels = 512;

template <bool Max>
void fluxion_global_pool(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  fx::random::generator gen{3};
  const fx::tensor<float> x = fx::random::normal<float>({pool_batch, pool_hw, pool_hw, pool_channels}, gen);
  const fx::tensor<float> w = fx::random::normal<float>({pool_batch, pool_channels}, gen);
  auto pass = [&] {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<float> y;
    if constexpr (Max) y = nn::global_max_pool2d{}(x);
    else y = nn::global_avg_pool2d{}(x);
    return tape.gradient(y, x, w);  // w as the output gradient: d sum(y * w) / dx
  };
  const fx::tensor<float> g = pass();
  // Each gradient column sums to its w (avg) or holds w at one position (max): the pass is real.
  const fx::tensor<float> per_channel = fx::reduce_sum(g, {1, 2});
  if (!fx::all(fx::abs(per_channel - w) < 1e-4f)) state.SkipWithError("fluxion: the gradient is wrong");
  for (auto _ : state) benchmark::DoNotOptimize(pass().data());
}
void global_avg_pool_fluxion(benchmark::State& s) { fluxion_global_pool<false>(s); }
void global_max_pool_fluxion(benchmark::State& s) { fluxion_global_pool<true>(s); }

/// One forward and backward pass of c.layer on c.x, with c.w as the output's gradient: d x and
/// every trainable variable's gradient from one backward pass (one gradient call over the input
/// and the variables' values, as LibTorch's autograd::grad over its inputs and parameters).
/// `forward` maps the input to the output (the layer's call; by default c.layer(x)).
template <class Case, class Forward>
std::pair<fx::tensor<float>, std::vector<fx::tensor<float>>> layer_pass(Case& c,
                                                                        const std::vector<fx::variable<float>*>& sources,
                                                                        Forward forward) {
  fx::gradient_tape tape;
  tape.watch(c.x);
  const fx::tensor<float> y = forward(c.x);
  std::vector<const fx::tensor<float>*> all{&c.x};
  for (auto* v : sources) all.push_back(&v->peek());
  std::vector<fx::tensor<float>> g = tape.gradient(y, all, c.w);
  fx::tensor<float> dx = g.front();
  g.erase(g.begin());
  return {dx, g};
}
template <class Case>
std::pair<fx::tensor<float>, std::vector<fx::tensor<float>>> layer_pass(Case& c,
                                                                        const std::vector<fx::variable<float>*>& sources) {
  return layer_pass(c, sources, [&](const fx::tensor<float>& x) { return fx::tensor<float>(c.layer(x)); });
}

constexpr fx::index_t rnn_batch = 64, rnn_steps = 32, rnn_features = 64, rnn_units = 128;

/// A recurrent layer built with seed 5 and its input (seed 6) and output gradient (seed 7): the
/// same numbers for fluxion and LibTorch.
template <class Layer>
struct rnn_case {
  Layer layer;
  fx::tensor<float> x, w;
  explicit rnn_case(nn::recurrent_options options = {}) : layer(options) {
    fx::random::generator gen{5}, gx{6}, gw{7};
    layer.build(fx::shape{rnn_steps, rnn_features}, gen);
    x = fx::random::normal<float>({rnn_batch, rnn_steps, rnn_features}, gx);
    w = fx::random::normal<float>({rnn_batch, rnn_units}, gw);
  }
};

/// Each example's length for the masked cases (seed 8), in [1, rnn_steps], and the mask "step <
/// length" (batch, steps).
std::vector<std::int64_t> rnn_lengths() {
  fx::random::generator gen{8};
  const auto u = fx::random::uniform<std::int32_t>({rnn_batch}, gen, 1, rnn_steps + 1).to_vector();
  return std::vector<std::int64_t>(u.begin(), u.end());
}
fx::tensor<bool> rnn_mask() {
  const auto lengths = rnn_lengths();
  std::vector<std::int32_t> keep;
  for (fx::index_t b = 0; b < rnn_batch; ++b)
    for (fx::index_t t = 0; t < rnn_steps; ++t) keep.push_back(t < lengths[static_cast<std::size_t>(b)] ? 1 : 0);
  return fx::tensor<bool>(fx::from_vector(keep, {rnn_batch, rnn_steps}) != 0);
}

template <class Layer, bool Masked = false>
void fluxion_rnn(benchmark::State& state, nn::rnn_activation activation = nn::rnn_activation::tanh) {
  set_threads(static_cast<int>(state.range(0)));
  rnn_case<Layer> c({.activation = activation});
  auto sources = c.layer.trainable_variables();
  const fx::tensor<bool> mask = rnn_mask();
  auto pass = [&] {
    if constexpr (Masked)
      return layer_pass(c, sources, [&](const fx::tensor<float>& x) { return c.layer.call(x, {.mask = &mask}); });
    else
      return layer_pass(c, sources);
  };
  const auto [dx, dvars] = pass();
  if (!fx::all(fx::is_finite(dx)) || fx::tensor<float>(fx::reduce_max(fx::abs(dx))).item() == 0.f)
    state.SkipWithError("fluxion: the input's gradient is zero or not finite");
  for (auto _ : state) benchmark::DoNotOptimize(pass().first.data());
}

constexpr fx::index_t att_batch = 32, att_steps = 64, att_e = 128, att_heads = 8, att_dim = 16;
using att_layer = nn::multi_head_attention<att_heads, att_dim>;

/// The layer built with seed 11 (random biases too), its input (seed 12) and output gradient (13).
struct att_case {
  att_layer layer;
  fx::tensor<float> x, w;
  att_case() {
    fx::random::generator gen{11}, gx{12}, gw{13};
    layer.build(fx::shape{att_steps, att_e}, gen);
    for (auto* v : layer.trainable_variables())
      if (v->shape().rank() < 3) v->assign(fx::random::normal<float>(v->shape(), gen, 0.f, 0.1f));
    x = fx::random::normal<float>({att_batch, att_steps, att_e}, gx);
    w = fx::random::normal<float>({att_batch, att_steps, att_e}, gw);
  }
};

void attention_fluxion(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  att_case c;
  auto sources = c.layer.trainable_variables();
  auto pass = [&] { return layer_pass(c, sources); };
  const auto [dx, dvars] = pass();
  // The output bias's gradient is the sum of w over every position: the pass is real.
  const fx::tensor<float> want_db = fx::reduce_sum(c.w, {0, 1});
  if (!fx::all(fx::abs(dvars[7] - want_db) < 1e-2f)) state.SkipWithError("fluxion: the output bias gradient is wrong");
  for (auto _ : state) benchmark::DoNotOptimize(pass().first.data());
}

constexpr fx::index_t up_batch = 64, up_hw = 14, up_in = 64, up_out = 32, up_k = 4;
using up_layer = nn::conv2d_transpose<up_out, up_k, nn::valid, 2>;
constexpr fx::index_t up_hw_out = 2 * up_hw + up_k - 2;

/// The layer built with seed 8, its input (seed 9) and output gradient (seed 10).
struct up_case {
  up_layer layer;
  fx::tensor<float> x, w;
  up_case() {
    fx::random::generator gen{8}, gx{9}, gw{10};
    layer.build(fx::shape{up_hw, up_hw, up_in}, gen);
    layer.bias().assign(fx::random::normal<float>({up_out}, gen));
    x = fx::random::normal<float>({up_batch, up_hw, up_hw, up_in}, gx);
    w = fx::random::normal<float>({up_batch, up_hw_out, up_hw_out, up_out}, gw);
  }
};

void conv_transpose_fluxion(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  up_case c;
  auto sources = c.layer.trainable_variables();
  auto pass = [&] { return layer_pass(c, sources); };
  const auto [dx, dvars] = pass();
  // The bias's gradient is the sum of w over every position: the pass is real.
  const fx::tensor<float> want_db = fx::reduce_sum(c.w, {0, 1, 2});
  if (!fx::all(fx::abs(dvars[1] - want_db) < 1e-2f)) state.SkipWithError("fluxion: the bias gradient is wrong");
  for (auto _ : state) benchmark::DoNotOptimize(pass().first.data());
}

constexpr fx::index_t gn_batch = 16, gn_hw = 32, gn_channels = 128, gn_groups = 32;
using gn_layer = nn::group_norm<gn_groups>;

/// A normalization layer over (Batch, Hw, Hw, Channels) with random gamma and beta (seed Seed), its
/// input (Seed + 1) and output gradient (Seed + 2): the same numbers for fluxion and LibTorch.
template <class Layer, fx::index_t Batch, fx::index_t Hw, fx::index_t Channels, std::uint64_t Seed>
struct norm_case {
  Layer layer;
  fx::tensor<float> x, w;
  norm_case() {
    fx::random::generator gen{Seed}, gx{Seed + 1}, gw{Seed + 2};
    layer.build(fx::shape{Hw, Hw, Channels}, gen);
    layer.gamma().assign(fx::random::uniform<float>({Channels}, gen, 0.5f, 1.5f));
    layer.beta().assign(fx::random::normal<float>({Channels}, gen));
    x = fx::random::normal<float>({Batch, Hw, Hw, Channels}, gx, 0.5f, 2.f);
    w = fx::random::normal<float>({Batch, Hw, Hw, Channels}, gw);
  }
};
/// A diffusion U-Net's group normalization (32 groups of 128 channels at 32x32, batch 16).
using gn_case = norm_case<gn_layer, gn_batch, gn_hw, gn_channels, 14>;
constexpr fx::index_t bn_batch = 64, bn_hw = 28, bn_channels = 32;
/// A small CNN's batch normalization (32 channels at 28x28, batch 64).
using bn_case = norm_case<nn::batch_norm<>, bn_batch, bn_hw, bn_channels, 17>;
constexpr fx::index_t ln_batch = 16, ln_hw = 16, ln_features = 256;
/// A transformer block's layer normalization: 4096 tokens of 256 features.
using ln_case = norm_case<nn::layer_norm<>, ln_batch, ln_hw, ln_features, 20>;

/// A training call (batch_norm: the batch's statistics, the moving ones updated) and its backward
/// pass; Inference: the call alone, not training (batch_norm: the moving statistics).
/// Relu: the layer with a relu after it, as a sequential model passes it (the layer's epilogue).
template <class Case, bool Inference, bool Relu = false>
void norm_fluxion(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  Case c;
  if constexpr (Inference) {
    for (auto _ : state) benchmark::DoNotOptimize(fx::tensor<float>(c.layer(c.x)).data());
  } else {
    auto sources = c.layer.trainable_variables();
    auto call = [&](const fx::tensor<float>& x) {
      if constexpr (Relu)
        return c.layer(x, /*training=*/true, nn::relu{});
      else
        return c.layer(x, /*training=*/true);
    };
    auto pass = [&] { return layer_pass(c, sources, call); };
    const auto [dx, dvars] = pass();
    // beta's gradient is the sum of w over every position (with a relu, where y is positive): the
    // pass is real.
    fx::tensor<float> want_db = fx::reduce_sum(c.w, {0, 1, 2});
    if constexpr (Relu) {
      const fx::tensor<float> y = call(c.x);
      want_db = fx::reduce_sum(fx::where(y > 0.f, c.w, 0.f), {0, 1, 2});
    }
    if (!fx::all(fx::abs(dvars[1] - want_db) < 1e-2f)) state.SkipWithError("fluxion: the beta gradient is wrong");
    for (auto _ : state) benchmark::DoNotOptimize(pass().first.data());
  }
}
void group_norm_fluxion(benchmark::State& s) { norm_fluxion<gn_case, false>(s); }
void group_norm_forward_fluxion(benchmark::State& s) { norm_fluxion<gn_case, true>(s); }
void batch_norm_fluxion(benchmark::State& s) { norm_fluxion<bn_case, false>(s); }
void batch_norm_inference_fluxion(benchmark::State& s) { norm_fluxion<bn_case, true>(s); }
void batch_norm_relu_fluxion(benchmark::State& s) { norm_fluxion<bn_case, false, true>(s); }
void layer_norm_fluxion(benchmark::State& s) { norm_fluxion<ln_case, false>(s); }
void layer_norm_forward_fluxion(benchmark::State& s) { norm_fluxion<ln_case, true>(s); }
void layer_norm_relu_fluxion(benchmark::State& s) { norm_fluxion<ln_case, false, true>(s); }

/// The layer with Keras's recurrent_dropout 0.2 in training (its step statements), against the fused
/// cells of the same layer in training without it.
template <class Layer>
void fluxion_rnn_recurrent_dropout(benchmark::State& state, double rate) {
  set_threads(static_cast<int>(state.range(0)));
  rnn_case<Layer> c({.recurrent_dropout = rate, .seed = 3});
  auto sources = c.layer.trainable_variables();
  auto pass = [&] {
    return layer_pass(c, sources, [&](const fx::tensor<float>& x) { return c.layer(x, /*training=*/true); });
  };
  const auto [dx, dvars] = pass();
  if (!fx::all(fx::is_finite(dx)) || fx::tensor<float>(fx::reduce_max(fx::abs(dx))).item() == 0.f)
    state.SkipWithError("fluxion: the input's gradient is zero or not finite");
  for (auto _ : state) benchmark::DoNotOptimize(pass().first.data());
}

void rnn_gru_fluxion(benchmark::State& s) { fluxion_rnn<nn::gru<rnn_units>>(s); }
void rnn_lstm_training_fluxion(benchmark::State& s) { fluxion_rnn_recurrent_dropout<nn::lstm<rnn_units>>(s, 0.0); }
void rnn_lstm_recurrent_dropout_fluxion(benchmark::State& s) {
  fluxion_rnn_recurrent_dropout<nn::lstm<rnn_units>>(s, 0.2);
}
void rnn_lstm_fluxion(benchmark::State& s) { fluxion_rnn<nn::lstm<rnn_units>>(s); }
void rnn_gru_masked_fluxion(benchmark::State& s) { fluxion_rnn<nn::gru<rnn_units>, true>(s); }
void rnn_simple_rnn_fluxion(benchmark::State& s) { fluxion_rnn<nn::simple_rnn<rnn_units>>(s); }
void rnn_simple_rnn_masked_fluxion(benchmark::State& s) { fluxion_rnn<nn::simple_rnn<rnn_units>, true>(s); }
void rnn_simple_rnn_relu_fluxion(benchmark::State& s) {
  fluxion_rnn<nn::simple_rnn<rnn_units>>(s, nn::rnn_activation::relu);
}
void rnn_lstm_masked_fluxion(benchmark::State& s) { fluxion_rnn<nn::lstm<rnn_units>, true>(s); }

#if FLUXION_BENCH_HAVE_TORCH

template <bool Max, bool Nhwc>
void torch_global_pool(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(0);
  const auto shape = Nhwc ? std::vector<std::int64_t>{pool_batch, pool_hw, pool_hw, pool_channels}
                          : std::vector<std::int64_t>{pool_batch, pool_channels, pool_hw, pool_hw};
  const auto dims = Nhwc ? std::vector<std::int64_t>{1, 2} : std::vector<std::int64_t>{2, 3};
  const auto x = torch::randn(shape).requires_grad_(true);
  const auto w = torch::randn({pool_batch, pool_channels});
  auto pass = [&] {
    auto y = Max ? x.amax(dims) : x.mean(dims);
    return torch::autograd::grad({y}, {x}, {w})[0];
  };
  const auto g = pass();
  if (!torch::allclose(g.sum(dims), w, 1e-4, 1e-4)) state.SkipWithError("LibTorch: the gradient is wrong");
  for (auto _ : state) benchmark::DoNotOptimize(pass().data_ptr());
}
/// Keras's column blocks (GRU: z, r, h) in PyTorch's order (r, z, n), transposed to (gates * units, in).
torch::Tensor torch_weight(const fx::tensor<float>& keras, bool gru) {
  auto k = torch::from_blob(const_cast<float*>(keras.data()), {keras.shape()[0], keras.shape()[1]}, torch::kFloat32);
  if (gru) {
    auto blocks = k.split(rnn_units, 1);
    k = torch::cat({blocks[1], blocks[0], blocks[2]}, 1);
  }
  return k.t().contiguous();
}

template <class Layer, class Module, class Options, bool Packed = false>
void torch_rnn(benchmark::State& state, nn::rnn_activation activation = nn::rnn_activation::tanh) {
  constexpr bool gru = std::is_same_v<Layer, nn::gru<rnn_units>>;
  set_threads(static_cast<int>(state.range(0)));
  rnn_case<Layer> c({.activation = activation});
  Options options(rnn_features, rnn_units);
  options.batch_first(true);
  if constexpr (std::is_same_v<Options, torch::nn::RNNOptions>)
    if (activation == nn::rnn_activation::relu) options.nonlinearity(torch::kReLU);
  Module rnn(options);
  {
    torch::NoGradGuard no_grad;
    auto p = rnn->named_parameters();
    p["weight_ih_l0"].copy_(torch_weight(c.layer.kernel().peek(), gru));
    p["weight_hh_l0"].copy_(torch_weight(c.layer.recurrent_kernel().peek(), gru));
    const fx::tensor<float>& b = c.layer.bias().peek();
    auto bias = torch::from_blob(const_cast<float*>(b.data()), {b.size()}, torch::kFloat32);
    if (gru)  // (2, 3 units): the input and recurrent biases, each in blocks z, r, h
      bias = bias.view({2, 3, rnn_units}).index_select(1, torch::tensor({1, 0, 2}, torch::kLong)).reshape({2, -1});
    p["bias_ih_l0"].copy_(gru ? bias[0] : bias);
    if (gru) p["bias_hh_l0"].copy_(bias[1]);
    else p["bias_hh_l0"].zero_();
  }
  const auto x = torch::from_blob(const_cast<float*>(c.x.data()), {rnn_batch, rnn_steps, rnn_features}, torch::kFloat32)
                     .clone()
                     .requires_grad_(true);
  const auto w = torch::from_blob(const_cast<float*>(c.w.data()), {rnn_batch, rnn_units}, torch::kFloat32).clone();
  std::vector<torch::Tensor> inputs{x};
  for (auto& p : rnn->parameters()) inputs.push_back(p);
  const auto lengths = torch::tensor(rnn_lengths(), torch::kLong);
  const fx::tensor<bool> mask = rnn_mask();
  auto last = [&] {
    if constexpr (Packed) {  // each example's state after its last real step
      const auto packed = torch::nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/true,
                                                                      /*enforce_sorted=*/false);
      const auto h = std::get<1>(rnn->forward_with_packed_input(packed));
      if constexpr (Layer::state_count == 1) return h[0];  // GRU, RNN: h_n; LSTM: (h_n, c_n)
      else return std::get<0>(h)[0];
    } else {
      auto out = std::get<0>(rnn->forward(x));
      return out.select(1, rnn_steps - 1);
    }
  };
  const fx::tensor<float> want = Packed ? c.layer.call(c.x, {.mask = &mask}) : c.layer(c.x);
  const auto got = last().detach();
  if (!torch::allclose(got, torch::from_blob(const_cast<float*>(want.data()), {rnn_batch, rnn_units}), 1e-4, 1e-4))
    state.SkipWithError("LibTorch's output differs from fluxion's with the same weights");
  for (auto _ : state) benchmark::DoNotOptimize(torch::autograd::grad({last()}, inputs, {w})[0].data_ptr());
}
void attention_torch(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  att_case c;
  torch::nn::MultiheadAttention mha(torch::nn::MultiheadAttentionOptions(att_e, att_heads));
  auto blob = [](const fx::tensor<float>& t, std::vector<std::int64_t> shape) {
    return torch::from_blob(const_cast<float*>(t.data()), shape, torch::kFloat32);
  };
  auto vars = c.layer.trainable_variables();  // q kernel, q bias, k kernel, k bias, v kernel, v bias, out kernel, out bias
  {
    torch::NoGradGuard no_grad;
    auto p = mha->named_parameters();
    std::vector<torch::Tensor> weights, biases;
    for (int i = 0; i < 3; ++i) {
      weights.push_back(blob(vars[2 * i]->peek(), {att_e, att_e}).t());  // (e, heads * dim)^T
      biases.push_back(blob(vars[2 * i + 1]->peek(), {att_e}));
    }
    p["in_proj_weight"].copy_(torch::cat(weights, 0));
    p["in_proj_bias"].copy_(torch::cat(biases, 0));
    p["out_proj.weight"].copy_(blob(vars[6]->peek(), {att_e, att_e}).t());
    p["out_proj.bias"].copy_(blob(vars[7]->peek(), {att_e}));
  }
  const auto x = blob(c.x, {att_batch, att_steps, att_e}).transpose(0, 1).contiguous().requires_grad_(true);
  const auto w = blob(c.w, {att_batch, att_steps, att_e}).transpose(0, 1).contiguous();
  auto forward = [&] { return std::get<0>(mha->forward(x, x, x, {}, /*need_weights=*/false)); };
  const fx::tensor<float> want = c.layer(c.x);
  const auto got = forward().detach().transpose(0, 1).contiguous();
  if (!torch::allclose(got, blob(want, {att_batch, att_steps, att_e}), 1e-3, 1e-3))
    state.SkipWithError("LibTorch's output differs from fluxion's with the same weights");
  std::vector<torch::Tensor> inputs{x};
  for (auto& p : mha->parameters()) inputs.push_back(p);
  for (auto _ : state) benchmark::DoNotOptimize(torch::autograd::grad({forward()}, inputs, {w})[0].data_ptr());
}

/// How torch_norm hands a norm_case's (N, H, W, C) numbers to LibTorch: PyTorch's layout (NCHW), an
/// NHWC tensor (channels_last), or as they are (a LayerNorm over the last axis).
enum class torch_layout { nchw, nhwc, as_is };
/// A LibTorch normalization module (make_module(), holding gamma and beta as weight and bias) on a
/// norm_case's numbers, laid out as Layout says; Training:
/// a training call and the input's, gamma's and beta's gradients, as norm_fluxion; otherwise the
/// call alone in eval mode. It first checks the same output as fluxion's call in the same mode,
/// without the moving statistics' update.
template <class Case, torch_layout Layout, bool Training, class MakeModule, bool Relu = false>
void torch_norm(benchmark::State& state, MakeModule make_module) {
  set_threads(static_cast<int>(state.range(0)));
  Case c;
  auto m = make_module();
  const auto& xs = c.x.shape();
  const fx::index_t channels = xs[3];
  {
    torch::NoGradGuard no_grad;
    m->weight.copy_(torch::from_blob(const_cast<float*>(c.layer.gamma().peek().data()), {channels}));
    m->bias.copy_(torch::from_blob(const_cast<float*>(c.layer.beta().peek().data()), {channels}));
  }
  m->train(Training);
  auto layout = [&](const fx::tensor<float>& t) {
    const auto nhwc = torch::from_blob(const_cast<float*>(t.data()), {xs[0], xs[1], xs[2], channels});
    if constexpr (Layout == torch_layout::as_is) return nhwc.clone();
    const auto nchw = nhwc.permute({0, 3, 1, 2});
    return Layout == torch_layout::nhwc ? nchw.contiguous(torch::MemoryFormat::ChannelsLast) : nchw.contiguous();
  };
  const auto x = layout(c.x).requires_grad_(Training);
  const auto w = layout(c.w);
  fx::tensor<float> want;
  if constexpr (Relu && requires { c.layer.call(c.x, Training, false); })
    want = c.layer.call(c.x, Training, /*update=*/false, nn::relu{});
  else if constexpr (Relu) want = c.layer(c.x, Training, nn::relu{});
  else if constexpr (requires { c.layer.call(c.x, Training, false); }) want = c.layer.call(c.x, Training, /*update=*/false);
  else want = c.layer(c.x);
  auto forward = [&] {
    if constexpr (Relu)
      return torch::relu(m->forward(x));
    else
      return m->forward(x);
  };
  auto got = forward().detach();
  if constexpr (Layout != torch_layout::as_is) got = got.permute({0, 2, 3, 1}).contiguous();
  if (!torch::allclose(got, torch::from_blob(const_cast<float*>(want.data()), got.sizes()), 1e-3, 1e-3))
    state.SkipWithError("LibTorch's output differs from fluxion's with the same weights");
  std::vector<torch::Tensor> inputs{x, m->weight, m->bias};
  for (auto _ : state) {
    if constexpr (Training) benchmark::DoNotOptimize(torch::autograd::grad({forward()}, inputs, {w})[0].data_ptr());
    else {
      torch::NoGradGuard no_grad;
      benchmark::DoNotOptimize(forward().data_ptr());
    }
  }
}
/// torch::nn::GroupNorm(32, 128).
template <bool Nhwc, bool Backward>
void torch_group_norm(benchmark::State& state) {
  torch_norm<gn_case, Nhwc ? torch_layout::nhwc : torch_layout::nchw, Backward>(state, [] {
    return torch::nn::GroupNorm(torch::nn::GroupNormOptions(gn_groups, gn_channels).eps(1e-3));
  });
}
void group_norm_torch_nchw(benchmark::State& s) { torch_group_norm<false, true>(s); }
void group_norm_torch_nhwc(benchmark::State& s) { torch_group_norm<true, true>(s); }
void group_norm_forward_torch_nchw(benchmark::State& s) { torch_group_norm<false, false>(s); }
void group_norm_forward_torch_nhwc(benchmark::State& s) { torch_group_norm<true, false>(s); }
/// torch::nn::BatchNorm2d(32), momentum 0.01 (Keras's 0.99); inference with the initial moving
/// statistics of both (zeros and ones).
template <bool Nhwc, bool Training, bool Relu = false>
void torch_batch_norm(benchmark::State& state) {
  auto make = [] {
    return torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(bn_channels).eps(1e-3).momentum(0.01));
  };
  torch_norm<bn_case, Nhwc ? torch_layout::nhwc : torch_layout::nchw, Training, decltype(make), Relu>(state, make);
}
void batch_norm_torch_nchw(benchmark::State& s) { torch_batch_norm<false, true>(s); }
void batch_norm_torch_nhwc(benchmark::State& s) { torch_batch_norm<true, true>(s); }
void batch_norm_inference_torch_nchw(benchmark::State& s) { torch_batch_norm<false, false>(s); }
void batch_norm_inference_torch_nhwc(benchmark::State& s) { torch_batch_norm<true, false>(s); }
/// BatchNorm2d then torch::relu, trained (fluxion's: batch_norm_relu_fluxion).
void batch_norm_relu_torch_nchw(benchmark::State& s) { torch_batch_norm<false, true, true>(s); }
void batch_norm_relu_torch_nhwc(benchmark::State& s) { torch_batch_norm<true, true, true>(s); }
/// torch::nn::LayerNorm over the 256 features.
template <bool Training, bool Relu = false>
void torch_layer_norm(benchmark::State& state) {
  auto make = [] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({ln_features}).eps(1e-3)); };
  torch_norm<ln_case, torch_layout::as_is, Training, decltype(make), Relu>(state, make);
}
void layer_norm_torch(benchmark::State& s) { torch_layer_norm<true>(s); }
void layer_norm_forward_torch(benchmark::State& s) { torch_layer_norm<false>(s); }
/// LayerNorm then torch::relu, trained (fluxion's: layer_norm_relu_fluxion).
void layer_norm_relu_torch(benchmark::State& s) { torch_layer_norm<true, true>(s); }

void conv_transpose_torch(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  up_case c;
  torch::nn::ConvTranspose2d up(torch::nn::ConvTranspose2dOptions(up_in, up_out, up_k).stride(2));
  {
    torch::NoGradGuard no_grad;
    const fx::tensor<float>& k = c.layer.kernel().peek();  // (h, w, out, in) -> PyTorch's (in, out, h, w)
    up->weight.copy_(torch::from_blob(const_cast<float*>(k.data()), {up_k, up_k, up_out, up_in}).permute({3, 2, 0, 1}));
    up->bias.copy_(torch::from_blob(const_cast<float*>(c.layer.bias().peek().data()), {up_out}));
  }
  const auto x = torch::from_blob(const_cast<float*>(c.x.data()), {up_batch, up_hw, up_hw, up_in})
                     .permute({0, 3, 1, 2})
                     .contiguous()
                     .requires_grad_(true);
  const auto w = torch::from_blob(const_cast<float*>(c.w.data()), {up_batch, up_hw_out, up_hw_out, up_out})
                     .permute({0, 3, 1, 2})
                     .contiguous();
  const fx::tensor<float> want = c.layer(c.x);
  const auto got = up->forward(x).detach().permute({0, 2, 3, 1}).contiguous();
  if (!torch::allclose(got, torch::from_blob(const_cast<float*>(want.data()), got.sizes()), 1e-3, 1e-3))
    state.SkipWithError("LibTorch's output differs from fluxion's with the same weights");
  std::vector<torch::Tensor> inputs{x, up->weight, up->bias};
  for (auto _ : state) benchmark::DoNotOptimize(torch::autograd::grad({up->forward(x)}, inputs, {w})[0].data_ptr());
}

void rnn_gru_torch(benchmark::State& s) { torch_rnn<nn::gru<rnn_units>, torch::nn::GRU, torch::nn::GRUOptions>(s); }
void rnn_lstm_torch(benchmark::State& s) { torch_rnn<nn::lstm<rnn_units>, torch::nn::LSTM, torch::nn::LSTMOptions>(s); }
void rnn_gru_masked_torch(benchmark::State& s) {
  torch_rnn<nn::gru<rnn_units>, torch::nn::GRU, torch::nn::GRUOptions, true>(s);
}
void rnn_lstm_masked_torch(benchmark::State& s) {
  torch_rnn<nn::lstm<rnn_units>, torch::nn::LSTM, torch::nn::LSTMOptions, true>(s);
}
void rnn_simple_rnn_torch(benchmark::State& s) {
  torch_rnn<nn::simple_rnn<rnn_units>, torch::nn::RNN, torch::nn::RNNOptions>(s);
}
void rnn_simple_rnn_relu_torch(benchmark::State& s) {
  torch_rnn<nn::simple_rnn<rnn_units>, torch::nn::RNN, torch::nn::RNNOptions>(s, nn::rnn_activation::relu);
}
void rnn_simple_rnn_masked_torch(benchmark::State& s) {
  torch_rnn<nn::simple_rnn<rnn_units>, torch::nn::RNN, torch::nn::RNNOptions, true>(s);
}

void global_avg_pool_torch_nchw(benchmark::State& s) { torch_global_pool<false, false>(s); }
void global_avg_pool_torch_nhwc(benchmark::State& s) { torch_global_pool<false, true>(s); }
void global_max_pool_torch_nchw(benchmark::State& s) { torch_global_pool<true, false>(s); }
void global_max_pool_torch_nhwc(benchmark::State& s) { torch_global_pool<true, true>(s); }

torch::Tensor to_torch(const fx::tensor<float>& t, std::vector<std::int64_t> shape) {
  return torch::from_blob(const_cast<float*>(t.data()), shape, torch::kFloat32).clone();
}
torch::Tensor labels_to_torch(const fx::tensor<std::int32_t>& t) {
  const std::vector<std::int32_t> labels = t.to_vector();
  std::vector<std::int64_t> v(labels.begin(), labels.end());
  return torch::tensor(v, torch::kInt64);
}

/// LibTorch's training step of Module: Adam on loss_of(model, x, y), by default the cross-entropy of
/// its output.
inline constexpr auto torch_cross_entropy = [](auto& model, const torch::Tensor& x, const torch::Tensor& y) {
  return torch::nn::functional::cross_entropy(model.forward(x), y);
};
template <class Module, class LossOf = decltype(torch_cross_entropy)>
void torch_train(benchmark::State& state, bool images, LossOf loss_of = torch_cross_entropy) {
  set_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(0);
  Module model;
  torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(1e-3).eps(1e-7));
  const batch_data d = make_batch(train_batch);
  const auto x = images ? to_torch(d.images, {train_batch, 1, 28, 28}) : to_torch(d.images, {train_batch, 784});
  const auto y = labels_to_torch(d.labels);
  auto step = [&] {
    opt.zero_grad();
    auto loss = loss_of(model, x, y);
    loss.backward();
    opt.step();
    return loss.template item<float>();
  };
  time_steps(state, step, "LibTorch: the loss did not fall");
}
void train_mlp_torch(benchmark::State& s) { torch_train<torch_mlp>(s, false); }
/// The same MLP with the penalty as PyTorch writes it: 1e-5 sum|h| of each hidden activity added to
/// the loss.
void train_mlp_activity_torch(benchmark::State& s) {
  torch_train<torch_mlp>(s, false, [](torch_mlp& model, const torch::Tensor& x, const torch::Tensor& y) {
    const auto h1 = torch::relu(model.l1(x)), h2 = torch::relu(model.l2(h1));
    return torch::nn::functional::cross_entropy(model.l3(h2), y) + 1e-5 * (h1.abs().sum() + h2.abs().sum());
  });
}
void train_cnn_torch(benchmark::State& s) { torch_train<torch_cnn>(s, true); }
void train_lstm_torch(benchmark::State& s) { torch_train<torch_lstm>(s, true); }

template <class Module>
void torch_infer(benchmark::State& state, bool images) {
  set_threads(static_cast<int>(state.range(0)));
  torch::manual_seed(0);
  Module model;
  torch::NoGradGuard no_grad;
  const batch_data d = make_batch(1);
  const auto x = images ? to_torch(d.images, {1, 1, 28, 28}) : to_torch(d.images, {1, 784});
  for (auto _ : state) benchmark::DoNotOptimize(model.forward(x).data_ptr());
}
void infer_mlp_torch(benchmark::State& s) { torch_infer<torch_mlp>(s, false); }
void infer_cnn_torch(benchmark::State& s) { torch_infer<torch_cnn>(s, true); }
#endif

void threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads"});
  for (int th : {1, 2}) b->Args({th});
  b->Unit(benchmark::kMicrosecond);
}

}  // namespace

BENCHMARK(train_mlp_fluxion)->Apply(threads);
BENCHMARK(train_mlp_activity_fluxion)->Apply(threads);
BENCHMARK(train_mlp_activity_compiled)->Apply(threads);
BENCHMARK(train_mlp_compiled)->Apply(threads);
BENCHMARK(train_mlp_floor)->Apply(threads);
BENCHMARK(train_cnn_fluxion)->Apply(threads);
BENCHMARK(train_cnn_compiled)->Apply(threads);
BENCHMARK(train_cnn_floor)->Apply(threads);
BENCHMARK(train_mlp_split)->Apply(threads);
BENCHMARK(train_cnn_split)->Apply(threads);
BENCHMARK(train_lstm_fluxion)->Apply(threads);
BENCHMARK(infer_mlp_fluxion)->Apply(threads);
BENCHMARK(infer_cnn_fluxion)->Apply(threads);
BENCHMARK(global_avg_pool_fluxion)->Apply(threads);
BENCHMARK(global_max_pool_fluxion)->Apply(threads);
BENCHMARK(rnn_gru_fluxion)->Apply(threads);
BENCHMARK(conv_transpose_fluxion)->Apply(threads);
BENCHMARK(attention_fluxion)->Apply(threads);
BENCHMARK(rnn_lstm_fluxion)->Apply(threads);
BENCHMARK(rnn_gru_masked_fluxion)->Apply(threads);
BENCHMARK(rnn_lstm_masked_fluxion)->Apply(threads);
BENCHMARK(rnn_simple_rnn_fluxion)->Apply(threads);
BENCHMARK(rnn_simple_rnn_masked_fluxion)->Apply(threads);
BENCHMARK(rnn_simple_rnn_relu_fluxion)->Apply(threads);
BENCHMARK(rnn_lstm_training_fluxion)->Apply(threads);
BENCHMARK(rnn_lstm_recurrent_dropout_fluxion)->Apply(threads);
BENCHMARK(group_norm_fluxion)->Apply(threads);
BENCHMARK(group_norm_forward_fluxion)->Apply(threads);
BENCHMARK(batch_norm_fluxion)->Apply(threads);
BENCHMARK(batch_norm_inference_fluxion)->Apply(threads);
BENCHMARK(batch_norm_relu_fluxion)->Apply(threads);
BENCHMARK(layer_norm_fluxion)->Apply(threads);
BENCHMARK(layer_norm_forward_fluxion)->Apply(threads);
BENCHMARK(layer_norm_relu_fluxion)->Apply(threads);
#if FLUXION_BENCH_HAVE_TORCH
BENCHMARK(global_avg_pool_torch_nchw)->Apply(threads);
BENCHMARK(global_avg_pool_torch_nhwc)->Apply(threads);
BENCHMARK(global_max_pool_torch_nchw)->Apply(threads);
BENCHMARK(global_max_pool_torch_nhwc)->Apply(threads);
BENCHMARK(rnn_gru_torch)->Apply(threads);
BENCHMARK(conv_transpose_torch)->Apply(threads);
BENCHMARK(group_norm_torch_nchw)->Apply(threads);
BENCHMARK(group_norm_torch_nhwc)->Apply(threads);
BENCHMARK(batch_norm_torch_nchw)->Apply(threads);
BENCHMARK(batch_norm_torch_nhwc)->Apply(threads);
BENCHMARK(batch_norm_inference_torch_nchw)->Apply(threads);
BENCHMARK(batch_norm_inference_torch_nhwc)->Apply(threads);
BENCHMARK(batch_norm_relu_torch_nchw)->Apply(threads);
BENCHMARK(batch_norm_relu_torch_nhwc)->Apply(threads);
BENCHMARK(layer_norm_torch)->Apply(threads);
BENCHMARK(layer_norm_forward_torch)->Apply(threads);
BENCHMARK(layer_norm_relu_torch)->Apply(threads);
BENCHMARK(group_norm_forward_torch_nchw)->Apply(threads);
BENCHMARK(group_norm_forward_torch_nhwc)->Apply(threads);
BENCHMARK(attention_torch)->Apply(threads);
BENCHMARK(rnn_lstm_torch)->Apply(threads);
BENCHMARK(rnn_gru_masked_torch)->Apply(threads);
BENCHMARK(rnn_lstm_masked_torch)->Apply(threads);
BENCHMARK(rnn_simple_rnn_torch)->Apply(threads);
BENCHMARK(rnn_simple_rnn_masked_torch)->Apply(threads);
BENCHMARK(rnn_simple_rnn_relu_torch)->Apply(threads);
BENCHMARK(train_mlp_torch)->Apply(threads);
BENCHMARK(train_mlp_activity_torch)->Apply(threads);
BENCHMARK(train_cnn_torch)->Apply(threads);
BENCHMARK(train_lstm_torch)->Apply(threads);
BENCHMARK(infer_mlp_torch)->Apply(threads);
BENCHMARK(infer_cnn_torch)->Apply(threads);
#endif
