// fx::nn models on fx::cuda: a sequential model declared with input<...>::on<fx::cuda> holds its
// variables on the device and runs there. From the same generator it starts from the cpu model's
// values, and its forward pass, gradients, optimizer steps, fx::fit over a dataset prefetched to
// the device (with validation data, and fx::evaluate), checkpoints and an activity
// regularization's penalty agree with the same model on the cpu.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../../scratch_dir.hpp"
#include "fluxion/data.hpp"
#include "fluxion/fit.hpp"
#include "fluxion/io.hpp"
#include "fluxion/losses.hpp"
#include "fluxion/nn.hpp"
#include "fluxion/optim.hpp"
#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;
using fluxion_test::check_values;
using fluxion_test::filled;

/// The same MLP on either device: dense, relu, dropout, flatten of a (3, 4) input, dense.
template <class Device>
auto mlp(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<3, 4>::template on<Device>{}, nn::flatten{}, nn::dense<16>{}, nn::relu{},
                        nn::dropout{0.25, 11}, nn::dense<5>{}, nn::tanh{});
}

template <class Model>
std::vector<std::vector<float>> values_of(Model& m) {
  std::vector<std::vector<float>> out;
  for (auto* v : m.variables()) out.push_back(fx::to<fx::cpu>(v->peek()).to_vector());
  return out;
}

/// The gradients of each loss with respect to its model's trainable variables agree, variable by
/// variable (1e-4 relative). Returns the variables, for the caller's update.
template <class HostModel, class DevModel>
auto check_same_gradients(fx::gradient_tape& host_tape, const fx::tensor<float>& host_loss, HostModel& host,
                          fx::gradient_tape& dev_tape, const fx::tensor<float, fx::cuda>& dev_loss, DevModel& dev) {
  auto hv = host.trainable_variables();
  auto dv = dev.trainable_variables();
  auto hg = host_tape.gradient(host_loss, hv);
  auto dg = dev_tape.gradient(dev_loss, dv);
  REQUIRE(hg.size() == dg.size());
  for (std::size_t i = 0; i < hg.size(); ++i) {
    CAPTURE(hv[i]->name());
    check_values(fx::to<fx::cpu>(dg[i]).to_vector(), hg[i].to_vector(), 1e-4);
  }
  return std::tuple{hv, hg, dv, dg};
}

void check_same(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b, double rtol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    check_values(a[i], b[i], rtol);
  }
}

}  // namespace

namespace {
/// A small CNN on either device: conv 5x5 same, relu, max pool, batch norm (its moving statistics
/// are among the variables compared; not right after a convolution, whose bias gradient would then
/// be zero up to rounding, which Adam magnifies), conv 3x3 valid at stride 2, average pool over the
/// border (same), flatten, dense.
template <class Device>
auto cnn(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<9, 9, 2>::template on<Device>{}, nn::conv2d<4, 5, nn::same>{},
                        nn::relu{}, nn::max_pool2d<2, 2, nn::same>{}, nn::batch_norm<>{0.9},
                        nn::conv2d<6, 3, nn::valid, 2>{}, nn::tanh{},
                        nn::avg_pool2d<2, 1, nn::same>{}, nn::flatten{}, nn::dense<5>{});
}

/// The seed's CNN+LSTM, small: conv, pool, (time, features) by reshape and permute, an LSTM that
/// returns its sequence, another that returns its last state, dense.
template <class Device>
auto cnn_lstm(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<8, 8, 1>::template on<Device>{}, nn::conv2d<4, 3, nn::same>{},
                        nn::max_pool2d<2>{}, nn::reshape<16, 4>{}, nn::permute<2, 1>{}, nn::lstm<6, true>{},
                        nn::lstm<7>{}, nn::dense<5>{});
}

/// The device model starts from the host model's values and agrees with it in inference, and over
/// three training steps (loss, every gradient, Adam's updates).
template <class HostModel, class DevModel>
void check_trains_as_on_the_cpu(HostModel& host, DevModel& dev, const fx::tensor<float>& x) {
  static_assert(std::is_same_v<decltype(dev.variables()), std::vector<fx::variable<float, fx::cuda>*>>);
  CHECK(values_of(dev) == values_of(host));  // drawn on the host from the same generator
  const fx::tensor<std::int32_t> y = fx::from_vector(std::vector<std::int32_t>{0, 1, 2, 3, 4, 0, 1, 2}, {8});
  const auto xd = fx::to<fx::cuda>(x);
  const auto yd = fx::to<fx::cuda>(y);
  // Inference, then training mode (dropout draws the same mask from the same generator).
  check_values(fx::to<fx::cpu>(dev(xd)).to_vector(), host(x).to_vector(), 1e-5);

  fx::optim::adam host_opt{1e-2}, dev_opt{1e-2};
  for (int step = 0; step < 3; ++step) {
    fx::gradient_tape host_tape, dev_tape;
    auto host_loss = fx::losses::sparse_softmax_cross_entropy(host(x, true), y);
    auto dev_loss = fx::losses::sparse_softmax_cross_entropy(dev(xd, true), yd);
    check_values(std::vector<float>{dev_loss.item()}, std::vector<float>{host_loss.item()}, 1e-5);
    auto [hv, hg, dv, dg] = check_same_gradients(host_tape, host_loss, host, dev_tape, dev_loss, dev);
    host_opt.apply_gradients(hg, hv);
    dev_opt.apply_gradients(dg, dv);
  }
  check_same(values_of(dev), values_of(host), 1e-4);
}
}  // namespace

TEST_CASE("cuda nn: a sequential model on the device matches the cpu model: values, forward, gradients, Adam") {
  auto host = mlp<fx::cpu>(5);
  auto dev = mlp<fx::cuda>(5);
  CHECK(dev.layer<1>().kernel().name() == "dense/kernel");
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 3, 4}, 21));
}

TEST_CASE("cuda nn: a CNN (conv2d, batch norm, max and average pooling) on the device trains as on the cpu") {
  auto host = cnn<fx::cpu>(6);
  auto dev = cnn<fx::cuda>(6);
  CHECK(dev.layer<0>().kernel().name() == "conv2d/kernel");
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dev.layer<0>().kernel())>, fx::variable<float, fx::cuda>>);
  CHECK(dev.layer<3>().moving_variance().name() == "batch_normalization/moving_variance");
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 9, 9, 2}, 22));
}

namespace {
/// Group and instance normalization after convolutions, on either device.
template <class Device>
auto group_norm_cnn(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6, 6, 2>::template on<Device>{}, nn::rescaling{0.5, -0.25},
                        nn::conv2d<8, 3, nn::same>{}, nn::group_norm<4>{}, nn::relu{}, nn::conv2d<6, 3>{}, nn::relu{}, nn::instance_norm<>{},
                        nn::flatten{}, nn::dense<5>{});  // the relu: a bias right before an instance
                                                         // normalization has a gradient of 0, rounding
}
}  // namespace

TEST_CASE("cuda nn: rescaling, group and instance normalization on the device train as on the cpu") {
  auto host = group_norm_cnn<fx::cpu>(23);
  auto dev = group_norm_cnn<fx::cuda>(23);
  CHECK(dev.layer<2>().gamma().name() == "group_normalization/gamma");
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 6, 6, 2}, 24));
}

namespace {
/// Global pooling on either device: a global average over the image, or a global max over the
/// (36 positions, 4 channels) sequence a reshape makes of it.
template <class Device>
auto global_avg_cnn(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6, 6, 2>::template on<Device>{}, nn::conv2d<8, 3, nn::same>{},
                        nn::relu{}, nn::global_avg_pool2d{}, nn::dense<5>{});
}
template <class Device>
auto global_max_sequence(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6, 6, 2>::template on<Device>{}, nn::conv2d<4, 3, nn::same>{},
                        nn::reshape<36, 4>{}, nn::global_max_pool1d<fx::keepdims>{}, nn::flatten{}, nn::dense<5>{});
}

/// Keras's Conv1D (causal and dilated, same and strided) and 1-D pooling on either device.
template <class Device>
auto sequence_cnn(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<12, 3>::template on<Device>{}, nn::conv1d<4, 3, nn::causal, 1, 2>{},
                        nn::relu{}, nn::max_pool1d<2>{}, nn::conv1d<4, 2, nn::same, 2>{}, nn::avg_pool1d<2, 1, nn::same>{},
                        nn::flatten{}, nn::dense<5>{});
}

/// Keras's other activations on either device, each after a dense layer.
template <class Device>
auto activations_mlp(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6>::template on<Device>{}, nn::dense<8>{}, nn::leaky_relu{},
                        nn::dense<8>{}, nn::elu{0.7}, nn::dense<8>{}, nn::selu{}, nn::dense<8>{}, nn::relu6{},
                        nn::dense<8>{}, nn::silu{}, nn::dense<8>{}, nn::softplus{}, nn::dense<8>{}, nn::softsign{},
                        nn::dense<8>{}, nn::mish{}, nn::dense<5>{});
}
}  // namespace

namespace {
/// A decoder on either device: conv2d down, nearest upsampling, zero padding and cropping, bilinear
/// upsampling of the rows, then conv2d_transpose up (same padding, stride 2; valid, stride 1), then
/// a dense head.
template <class Device>
auto transposed_cnn(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6, 6, 2>::template on<Device>{}, nn::conv2d<4, 3, nn::same, 2>{},
                        nn::relu{}, nn::upsampling2d<2>{}, nn::zero_padding2d<1>{}, nn::cropping2d<1>{},
                        nn::upsampling2d<2, 1, nn::bilinear>{}, nn::conv2d_transpose<3, 3, nn::same, 2>{}, nn::relu{}, nn::conv2d_transpose<2, 2>{},
                        nn::flatten{}, nn::dense<5>{});
}
}  // namespace

namespace {
/// A Transformer-style encoder on either device: causal self-attention, layer norm, pooling, dense.
template <class Device>
auto attention_model(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6, 8>::template on<Device>{},
                        nn::multi_head_attention<2, 4>{nn::causal_mask}, nn::layer_norm{}, nn::global_avg_pool1d{},
                        nn::dense<5>{});
}
}  // namespace

TEST_CASE("cuda nn: multi-head attention (causal, and with an attention mask) on the device trains as on the cpu") {
  auto host = attention_model<fx::cpu>(16);
  auto dev = attention_model<fx::cuda>(16);
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 6, 8}, 27));
  // Cross-attention with a mask, forward and the query's gradient.
  fx::random::generator gen{17};
  nn::multi_head_attention<2, 3> mh;
  nn::multi_head_attention<2, 3, 3, float, fx::cuda> md;
  fx::random::generator g1{18}, g2{18};
  mh.build(4, 5, 5, g1);
  md.build(4, 5, 5, g2);
  const fx::tensor<float> q = filled<float>({2, 3, 4}, 28), v = filled<float>({2, 4, 5}, 29);
  fx::tensor<bool> mask = fx::random::uniform<float>({2, 3, 4}, gen) > 0.4f;
  for (fx::index_t i = 0; i < 2 * 3; ++i) mask.mutable_data()[i * 4] = true;
  const auto qd = fx::to<fx::cuda>(q), vd = fx::to<fx::cuda>(v);
  const auto maskd = fx::to<fx::cuda>(mask);
  fx::gradient_tape th, td;
  th.watch(q);
  td.watch(qd);
  const fx::tensor<float> yh = mh.call(q, v, {.attention_mask = &mask});
  const auto yd = md.call(qd, vd, {.attention_mask = &maskd});
  check_values(fx::to<fx::cpu>(yd).to_vector(), yh.to_vector(), 1e-5);
  const auto gh = th.gradient(fx::tensor<float>(fx::reduce_sum(fx::square(yh))), q);
  const auto gd = td.gradient(fx::tensor<float, fx::cuda>(fx::reduce_sum(fx::square(yd))), qd);
  check_values(fx::to<fx::cpu>(gd).to_vector(), gh.to_vector(), 1e-5);
}

namespace {
/// An MLP with Keras's ActivityRegularization after its hidden layer's activation.
template <class Device>
auto activity_mlp(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<6>::template on<Device>{}, nn::dense<8>{}, nn::tanh{},
                        nn::activity_regularization{0.01, 0.02}, nn::dense<5>{});
}
}  // namespace

TEST_CASE("cuda nn: activity_regularization's penalty and its gradient on the device, as on the cpu (tape, compile_step)") {
  auto host = activity_mlp<fx::cpu>(31);
  auto dev = activity_mlp<fx::cuda>(31);
  const fx::tensor<float> x = filled<float>({8, 6}, 27);
  const fx::tensor<std::int32_t> y = fx::from_vector(std::vector<std::int32_t>{0, 1, 2, 3, 4, 0, 1, 2}, {8});
  const auto xd = fx::to<fx::cuda>(x);
  const auto yd = fx::to<fx::cuda>(y);
  fx::optim::adam host_opt{1e-2}, dev_opt{1e-2};
  for (int step = 0; step < 2; ++step) {
    fx::gradient_tape host_tape, dev_tape;
    const fx::tensor<float> host_out = host(x, true);
    const fx::tensor<float, fx::cuda> dev_out = dev(xd, true);
    REQUIRE(dev.added_losses().size() == 1);
    check_values(std::vector<float>{dev.added_losses()[0].item()}, std::vector<float>{host.added_losses()[0].item()}, 1e-5);
    const fx::tensor<float> host_loss = fx::losses::sparse_softmax_cross_entropy(host_out, y) + host.regularization_loss();
    const fx::tensor<float, fx::cuda> dev_loss = fx::losses::sparse_softmax_cross_entropy(dev_out, yd) + dev.regularization_loss();
    check_values(std::vector<float>{dev_loss.item()}, std::vector<float>{host_loss.item()}, 1e-5);
    auto [hv, hg, dv, dg] = check_same_gradients(host_tape, host_loss, host, dev_tape, dev_loss, dev);
    host_opt.apply_gradients(hg, hv);
    dev_opt.apply_gradients(dg, dv);
  }
  // The compiled step recomputes the layer in its backward pass, on the device too.
  auto host_step = nn::compile_step(host, host_opt, [](const auto& l, const auto& t) { return fx::losses::sparse_softmax_cross_entropy(l, t); });
  auto dev_step = nn::compile_step(dev, dev_opt, [](const auto& l, const auto& t) { return fx::losses::sparse_softmax_cross_entropy(l, t); });
  const fx::tensor<float> hl = host_step(x, y);
  const fx::tensor<float, fx::cuda> dl = dev_step(xd, yd);
  check_values(std::vector<float>{dl.item()}, std::vector<float>{hl.item()}, 1e-5);
  check_same(values_of(dev), values_of(host), 1e-4);
}

TEST_CASE("cuda nn: a decoder (upsampling2d nearest and bilinear, zero_padding2d, cropping2d, conv2d_transpose) on the device trains as on the cpu") {
  auto host = transposed_cnn<fx::cpu>(15);
  auto dev = transposed_cnn<fx::cuda>(15);
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 6, 6, 2}, 26));
}

TEST_CASE("cuda nn: Keras's other activations (elu, selu, leaky_relu, relu6, silu, softplus, softsign, mish) train as on the cpu") {
  auto host = activations_mlp<fx::cpu>(14);
  auto dev = activations_mlp<fx::cuda>(14);
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 6}, 25));
}

TEST_CASE("cuda nn: global average and max pooling on the device train as on the cpu") {
  auto host_avg = global_avg_cnn<fx::cpu>(12);
  auto dev_avg = global_avg_cnn<fx::cuda>(12);
  check_trains_as_on_the_cpu(host_avg, dev_avg, filled<float>({8, 6, 6, 2}, 23));
  auto host_max = global_max_sequence<fx::cpu>(13);
  auto dev_max = global_max_sequence<fx::cuda>(13);
  check_trains_as_on_the_cpu(host_max, dev_max, filled<float>({8, 6, 6, 2}, 24));
}

/// MobileNet's blocks, small: depthwise 3x3 (multiplier 2) at stride 2, relu6, a separable
/// convolution, a dilated depthwise one, flatten, dense.
template <class Device>
auto mobilenet_blocks(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::input<7, 7, 3>::template on<Device>{},
                        nn::depthwise_conv2d<3, nn::same, 2, 1, 2>{}, nn::relu6{}, nn::separable_conv2d<5, 3, nn::same>{},
                        nn::relu{}, nn::depthwise_conv2d<2, nn::valid, 1, 2>{}, nn::flatten{}, nn::dense<5>{});
}

TEST_CASE("cuda nn: depthwise and separable convolutions on the device train as on the cpu") {
  auto host = mobilenet_blocks<fx::cpu>(17);
  auto dev = mobilenet_blocks<fx::cuda>(17);
  CHECK(dev.layer<2>().pointwise_kernel().shape() == fx::shape{1, 1, 6, 5});
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 7, 7, 3}, 28));
}

TEST_CASE("cuda nn: conv1d (causal, dilated, strided) and the 1-D pools on the device train as on the cpu") {
  auto host = sequence_cnn<fx::cpu>(16);
  auto dev = sequence_cnn<fx::cuda>(16);
  CHECK(dev.layer<0>().kernel().shape() == fx::shape{3, 3, 4});
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 12, 3}, 27));
}

TEST_CASE("cuda nn: a CNN+LSTM (backpropagation through time) on the device trains as on the cpu") {
  auto host = cnn_lstm<fx::cpu>(8);
  auto dev = cnn_lstm<fx::cuda>(8);
  CHECK(dev.layer<4>().recurrent_kernel().name() == "lstm/recurrent_kernel");
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 8, 8, 1}, 23));
}

TEST_CASE("cuda nn: gradient checkpointing (nn::recompute) on the device trains as on the cpu") {
  // A recomputed dense layer and a recomputed device model (a segment of three layers).
  using segment = nn::sequential_t<nn::input<16>::on<fx::cuda>, nn::dense<16>, nn::tanh, nn::dense<16>>;
  using host_segment = nn::sequential_t<nn::input<16>, nn::dense<16>, nn::tanh, nn::dense<16>>;
  fx::random::generator host_gen{12}, dev_gen{12};
  auto host = nn::sequential(host_gen, nn::input<3, 4>{}, nn::flatten{}, nn::recompute<nn::dense<16>>{}, nn::relu{},
                             nn::recompute<host_segment>{}, nn::relu{}, nn::dense<5>{});
  auto dev = nn::sequential(dev_gen, nn::input<3, 4>::on<fx::cuda>{}, nn::flatten{}, nn::recompute<nn::dense<16>>{},
                            nn::relu{}, nn::recompute<segment>{}, nn::relu{}, nn::dense<5>{});
  static_assert(std::is_same_v<decltype(dev.layer<1>().trainable_variables()), std::vector<fx::variable<float, fx::cuda>*>>);
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 3, 4}, 25));
  // Moved to the model's device, a segment keeps its layer's settings.
  auto kept = nn::sequential(nn::input<4>::on<fx::cuda>{}, nn::recompute<nn::batch_norm<>>{nn::batch_norm<>{0.5}});
  CHECK(kept.layer<0>().layer().momentum() == 0.5);
}

TEST_CASE("cuda nn: reversible blocks on the device reconstruct their inputs and train as on the cpu") {
  // Two blocks whose F and G are conv, relu, batch norm (batch norm right after the convolution
  // would make its bias's gradient zero up to rounding; see cnn above); the backward pass rebuilds
  // each block's input from its output on the device.
  using f_dev = nn::sequential_t<nn::input<5, 5, 2>::on<fx::cuda>, nn::conv2d<2, 3, nn::same>, nn::relu,
                                 nn::batch_norm<>>;
  using f_host = nn::sequential_t<nn::input<5, 5, 2>, nn::conv2d<2, 3, nn::same>, nn::relu, nn::batch_norm<>>;
  fx::random::generator host_gen{13}, dev_gen{13};
  auto host = nn::sequential(host_gen, nn::input<5, 5, 4>{}, nn::reversible_sequence<f_host, f_host, 2>{},
                             nn::flatten{}, nn::dense<5>{});
  auto dev = nn::sequential(dev_gen, nn::input<5, 5, 4>::on<fx::cuda>{}, nn::reversible_sequence<f_dev, f_dev, 2>{},
                            nn::flatten{}, nn::dense<5>{});
  CHECK(dev.layer<0>().reversible());
  check_trains_as_on_the_cpu(host, dev, filled<float>({8, 5, 5, 4}, 26));
}

TEST_CASE("cuda nn: nn::compile_step on the device gives the tape-based step's numbers, bitwise") {
  // The CNN: conv, pool and dense statements, and batch norm as a recomputed segment.
  auto taped = cnn<fx::cuda>(9);
  auto compiled = cnn<fx::cuda>(9);
  fx::optim::adam taped_opt{1e-2}, compiled_opt{1e-2};
  auto loss_fn = [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  };
  auto step = nn::compile_step(compiled, compiled_opt, loss_fn);
  const auto x = fx::to<fx::cuda>(filled<float>({8, 9, 9, 2}, 24));
  const auto y = fx::to<fx::cuda>(fx::from_vector(std::vector<std::int32_t>{4, 3, 2, 1, 0, 4, 3, 2}, {8}));
  std::vector<float> taped_losses, compiled_losses;
  for (int i = 0; i < 3; ++i) {
    fx::gradient_tape tape;
    fx::tensor<float, fx::cuda> loss = loss_fn(taped(x, true), y);
    auto vars = taped.trainable_variables();
    taped_opt.apply_gradients(tape.gradient(loss, vars), vars);
    taped_losses.push_back(loss.item());
    compiled_losses.push_back(step(x, y).item());
  }
  CHECK(compiled_losses == taped_losses);
  CHECK(taped_losses.back() < taped_losses.front());
  CHECK(values_of(compiled) == values_of(taped));  // moving statistics included
  CHECK(compiled_opt.iterations() == 3);
}

TEST_CASE("cuda nn: fx::fit trains a device model from a dataset prefetched to the device, as on the cpu") {
  const fx::tensor<float> x = filled<float>({64, 3, 4}, 31);
  std::vector<std::int32_t> labels(64);
  for (int i = 0; i < 64; ++i) labels[static_cast<std::size_t>(i)] = (x.data()[12 * i] > 0) + 2 * (x.data()[12 * i + 1] > 0);
  const auto y = fx::from_vector(labels, {64});
  auto host = mlp<fx::cpu>(7);
  auto dev = mlp<fx::cuda>(7);
  fx::optim::adam host_opt{1e-2}, dev_opt{1e-2};
  auto loss = [](const auto& logits, const auto& l) { return fx::losses::sparse_softmax_cross_entropy(logits, l); };
  // Validation on the first 24 examples, in batches of 10 (the last one of 4), on each device.
  const fx::tensor<float> vx = fx::slice(x, {0, 0, 0}, {24, 3, 4});
  const fx::tensor<std::int32_t> vy = fx::slice(y, {0}, {24});
  const auto host_history = fx::fit(host, host_opt, loss, fx::data::tensors(x, y).batch(16).prefetch(2),
                                    {.epochs = 4, .verbose = 0, .handle_interrupt = false},
                                    fx::data::tensors(vx, vy).batch(10));
  const auto dev_history = fx::fit(dev, dev_opt, loss, fx::data::tensors(x, y).batch(16).prefetch_to<fx::cuda>(2),
                                   {.epochs = 4, .verbose = 0, .handle_interrupt = false},
                                   fx::data::tensors(vx, vy).batch(10).prefetch_to<fx::cuda>(1));
  REQUIRE(dev_history.loss.size() == 4);
  check_values(dev_history.loss, host_history.loss, 1e-4);
  check_values(dev_history.accuracy, host_history.accuracy, 1e-6);
  REQUIRE(dev_history.val_loss.size() == 4);
  check_values(dev_history.val_loss, host_history.val_loss, 1e-4);
  check_values(dev_history.val_accuracy, host_history.val_accuracy, 1e-6);
  const fx::evaluation e = fx::evaluate(dev, loss, fx::data::tensors(vx, vy).batch(10).prefetch_to<fx::cuda>(1));
  CHECK(e.samples == 24);
  CHECK(e.loss == dev_history.val_loss.back());
  CHECK(dev_history.loss.back() < dev_history.loss.front());
  CHECK(dev_opt.iterations() == 16);
  check_same(values_of(dev), values_of(host), 1e-3);
  // fx::predict (stop 56) on the device: the cpu model's outputs, over a prefetched dataset and over
  // a tensor in batches of 7 (sliced and concatenated on the device), reading nothing back.
  const fx::tensor<float> want = fx::predict(host, fx::data::tensors(vx, vy).batch(10));
  const std::int64_t reads = fx::memory::stats<fx::cuda>().host_reads;
  const fx::tensor<float, fx::cuda> got = fx::predict(dev, fx::data::tensors(vx, vy).batch(10).prefetch_to<fx::cuda>(1));
  const fx::tensor<float, fx::cuda> sliced = fx::predict(dev, fx::to<fx::cuda>(vx), 7);
  CHECK(fx::memory::stats<fx::cuda>().host_reads == reads);
  CHECK(got.shape() == want.shape());
  CHECK(sliced.shape() == want.shape());
  check_values(fx::to<fx::cpu>(got).to_vector(), want.to_vector(), 1e-3);
  check_values(fx::to<fx::cpu>(sliced).to_vector(), fx::predict(host, vx, 7).to_vector(), 1e-3);
}

namespace {
/// Records the accuracy each on_batch_end sees, and the device's host reads so far; reads it every
/// `every` global steps (0: never).
struct accuracy_recorder : fx::callback {
  std::int64_t every = 1;
  std::vector<double> accuracy;
  std::vector<std::int64_t> reads;
  bool reads_batch_metrics(const fx::fit_logs& logs) const override { return every > 0 && logs.global_step % every == 0; }
  void on_batch_end(const fx::fit_logs& logs) override {
    accuracy.push_back(logs.accuracy);
    reads.push_back(fx::memory::stats<fx::cuda>().host_reads);
  }
};
}  // namespace

TEST_CASE("cuda nn: fx::fit reads back only each step's loss, and the accuracy where a callback shows it") {
  const fx::tensor<float> x = filled<float>({32, 3, 4}, 33);
  std::vector<std::int32_t> labels(32);
  for (int i = 0; i < 32; ++i) labels[static_cast<std::size_t>(i)] = (x.data()[12 * i] > 0) + 2 * (x.data()[12 * i + 1] > 0);
  const auto y = fx::from_vector(labels, {32});
  std::vector<std::pair<fx::tensor<float>, fx::tensor<std::int32_t>>> host_batches;
  std::vector<std::pair<fx::tensor<float, fx::cuda>, fx::tensor<std::int32_t, fx::cuda>>> dev_batches;
  for (fx::index_t b = 0; b < 4; ++b) {
    host_batches.emplace_back(fx::slice(x, {8 * b, 0, 0}, {8, 3, 4}), fx::slice(y, {8 * b}, {8}));
    dev_batches.emplace_back(fx::to<fx::cuda>(host_batches.back().first), fx::to<fx::cuda>(host_batches.back().second));
  }
  auto loss = [](const auto& logits, const auto& l) { return fx::losses::sparse_softmax_cross_entropy(logits, l); };
  const fx::fit_options options{.epochs = 2, .verbose = 0, .handle_interrupt = false};
  // On the cpu, a callback that reads every step: the reference accuracies.
  auto host = mlp<fx::cpu>(9);
  fx::optim::adam host_opt{1e-2};
  accuracy_recorder host_every;
  auto with = [&](fx::callback* c) {
    fx::fit_options o = options;
    o.callbacks = {c};
    return o;
  };
  const auto host_history = fx::fit(host, host_opt, loss, host_batches, with(&host_every));
  REQUIRE(host_every.accuracy.size() == 8);

  // On the device, the same callback reading every third global step: it sees the cpu's running
  // accuracy there and -1 elsewhere.
  auto dev = mlp<fx::cuda>(9);
  fx::optim::adam dev_opt{1e-2};
  accuracy_recorder sparse;
  sparse.every = 3;
  const std::int64_t before = fx::memory::stats<fx::cuda>().host_reads;
  const auto dev_history = fx::fit(dev, dev_opt, loss, dev_batches, with(&sparse));
  const std::int64_t total = fx::memory::stats<fx::cuda>().host_reads - before;
  REQUIRE(sparse.accuracy.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    if ((i + 1) % 3 == 0) CHECK(sparse.accuracy[i] == doctest::Approx(host_every.accuracy[i]).epsilon(1e-9));
    else CHECK(sparse.accuracy[i] == -1);
  }
  check_values(dev_history.accuracy, host_history.accuracy, 1e-9);
  check_values(dev_history.loss, host_history.loss, 1e-4);
  // Per step: the loss's value (a copy to the host; until stop 60 also the labels, for
  // sparse_softmax_cross_entropy's range check, now a kernel); two more (the accuracy's sums) at the
  // steps the callback reads and at each epoch's end.
  std::vector<std::int64_t> per_step{sparse.reads[0] - before};
  for (std::size_t i = 1; i < 8; ++i) per_step.push_back(sparse.reads[i] - sparse.reads[i - 1]);
  const std::vector<std::int64_t> want{1, 1, 3, 1, 1 + 2, 3, 1, 1};  // step 5 starts epoch 2 after epoch 1's reads
  CHECK(per_step == want);
  CHECK(total == sparse.reads.back() - before + 2);  // epoch 2's end
}

TEST_CASE("cuda nn: fx::fit of a tagger whose mask reaches the loss, with sample and class weights, as on the cpu") {
  // Rows of 6, 4, 2 and 1 tokens, padded with 0; tag = token % 3; a weight per row.
  std::vector<std::int32_t> ids, tags;
  for (int r = 0; r < 32; ++r)
    for (int t = 0; t < 6; ++t) {
      const bool kept = t < 6 - 2 * (r % 4) + (r % 4 == 3 ? 1 : 0);
      const std::int32_t id = kept ? 1 + (r * 7 + t * 3) % 9 : 0;
      ids.push_back(id);
      tags.push_back(kept ? id % 3 : 0);
    }
  const auto x = fx::from_vector(ids, {32, 6});
  const auto y = fx::from_vector(tags, {32, 6});
  const fx::tensor<float> w = fx::from_vector(std::vector<float>(32, 1.5f), {32});
  auto make = [](auto input) {
    fx::random::generator gen{12};
    return nn::sequential(gen, input, nn::embedding<10, 4>::mask_zero{}, nn::gru<5, true>{}, nn::dense<3>{});
  };
  auto host = make(nn::typed_input<std::int32_t, 6>{});
  auto dev = make(nn::typed_input<std::int32_t, 6>::on<fx::cuda>{});
  fx::optim::adam host_opt{1e-2}, dev_opt{1e-2};
  auto loss = [](const auto& logits, const auto& l, const auto& weights) {
    return fx::losses::sparse_softmax_cross_entropy(logits, l, weights);
  };
  const fx::fit_options options{.epochs = 3, .verbose = 0, .handle_interrupt = false, .class_weight = {1.0, 2.0, 0.5}};
  // With Keras's metrics (plain and weighted; the device's outputs are copied back for them) and
  // early stopping that keeps the device model's best variables (stop 57).
  fx::metrics::sparse_categorical_accuracy host_plain{"plain"}, dev_plain{"plain"}, host_weighted{"weighted"},
      dev_weighted{"weighted"};
  fx::early_stopping host_best{host, {.patience = 5, .monitor = "loss", .restore_best_weights = true}};
  fx::early_stopping dev_best{dev, {.patience = 5, .monitor = "loss", .restore_best_weights = true}};
  fx::fit_options host_options = options, dev_options = options;
  host_options.callbacks = {&host_best};
  host_options.metrics = {&host_plain};
  host_options.weighted_metrics = {&host_weighted};
  dev_options.callbacks = {&dev_best};
  dev_options.metrics = {&dev_plain};
  dev_options.weighted_metrics = {&dev_weighted};
  const auto host_history = fx::fit(host, host_opt, loss, fx::data::tensors(x, y, w).batch(8), host_options);
  const auto dev_history = fx::fit(dev, dev_opt, loss, fx::data::tensors(x, y, w).batch(8).prefetch_to<fx::cuda>(2), dev_options);
  REQUIRE(dev_history.loss.size() == 3);
  check_values(dev_history.loss, host_history.loss, 1e-4);
  check_values(dev_history.accuracy, host_history.accuracy, 1e-6);
  check_values(dev_history.metric("plain"), host_history.metric("plain"), 1e-6);
  check_values(dev_history.metric("weighted"), host_history.metric("weighted"), 1e-6);
  check_values(dev_history.metric("plain"), dev_history.accuracy, 1e-12);  // the mask reaches it, as fit's own
  CHECK(dev_best.best_epoch() == host_best.best_epoch());
  CHECK(dev_history.loss.back() < dev_history.loss.front());
  const fx::evaluation e = fx::evaluate(dev, loss, fx::data::tensors(x, y).batch(8).prefetch_to<fx::cuda>(1));
  const fx::evaluation want = fx::evaluate(host, loss, fx::data::tensors(x, y).batch(8));
  CHECK(e.loss == doctest::Approx(want.loss).epsilon(1e-4));
  check_same(values_of(dev), values_of(host), 1e-3);
}

namespace {
/// A composite model on the device: a shared trunk and two heads.
struct two_heads : nn::model<two_heads, float, fx::cuda> {
  nn::sequential_t<nn::input<6>::on<fx::cuda>, nn::dense<8>, nn::relu> trunk;
  nn::dense<3, float, fx::cuda> classes;
  nn::dense<1, float, fx::cuda> score;
  FLUXION_LAYERS(trunk, classes, score)
  auto call(const fx::tensor<float, fx::cuda>& x, bool training = false) {
    auto h = trunk(x, training);
    return std::pair{classes(h), score(h)};
  }
};
}  // namespace

TEST_CASE("cuda nn: a composite device model lists its variables by name; checkpoints move models across devices") {
  two_heads net;
  auto [c, s] = net(fx::to<fx::cuda>(filled<float>({5, 6}, 3)));
  CHECK(c.shape() == fx::shape{5, 3});
  CHECK(s.shape() == fx::shape{5, 1});
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"trunk/dense/kernel", "trunk/dense/bias", "classes/kernel", "classes/bias",
                                          "score/kernel", "score/bias"});

  scratch_dir dir;
  auto dev = mlp<fx::cuda>(9);
  fx::checkpoint{{"model", dev}}.save(dir.file("mlp"));
  auto host = mlp<fx::cpu>(10);
  fx::checkpoint{{"model", host}}.restore(dir.file("mlp"));
  CHECK(values_of(host) == values_of(dev));
  const fx::tensor<float> x = filled<float>({4, 3, 4}, 8);
  check_values(fx::to<fx::cpu>(dev(fx::to<fx::cuda>(x))).to_vector(), host(x).to_vector(), 1e-5);
}

TEST_CASE("cuda nn: layer_norm and embedding models on the device match the cpu's, forward and gradients") {
  auto make = [](auto input) {
    fx::random::generator gen{13};
    return nn::sequential(gen, input, nn::embedding<10, 4>{}, nn::layer_norm{}, nn::relu{}, nn::flatten{}, nn::dense<3>{});
  };
  auto host = make(nn::typed_input<std::int32_t, 5>{});
  auto dev = make(nn::typed_input<std::int32_t, 5>::on<fx::cuda>{});
  static_assert(std::is_same_v<decltype(dev.variables()), std::vector<fx::variable<float, fx::cuda>*>>);
  CHECK(values_of(dev) == values_of(host));
  const auto ids = fx::from_vector(std::vector<std::int32_t>{1, 4, 4, 9, 0, 3, 3, 2, 8, 7}, {2, 5});
  const auto ids_dev = fx::to<fx::cuda>(ids);
  fx::gradient_tape host_tape, dev_tape;
  auto host_out = host(ids, true);
  auto dev_out = dev(ids_dev, true);
  check_values(fx::to<fx::cpu>(dev_out).to_vector(), host_out.to_vector(), 1e-5);
  fx::tensor<float> host_loss = fx::reduce_sum(fx::square(host_out));
  fx::tensor<float, fx::cuda> dev_loss = fx::reduce_sum(fx::square(dev_out));
  check_same_gradients(host_tape, host_loss, host, dev_tape, dev_loss, dev);
  // An index out of range is refused on the device as on the cpu, by the next read.
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(dev(fx::to<fx::cuda>(fx::from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 10}, {1, 5})))),
                       doctest::Contains("indices[0, 4] = 10 is not in [0, 10)"), fx::out_of_range);
}
