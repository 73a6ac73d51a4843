// The LSTM's, the GRU's and the SimpleRNN's fused cells on fx::cuda (backend/cuda/recurrent.hpp,
// nn/lstm_cell.hpp, nn/gru_cell.hpp, nn/simple_rnn.hpp), and nn::bidirectional around them. A sequence that one tape records (one-shot
// or persistent) runs as one cell kernel per step and one tape entry; under two tapes it takes
// nn/lstm.hpp's or nn/gru.hpp's statements. Either way the output and the gradient of every
// variable (kernel, recurrent kernel and bias of both layers, and the dense layer after them) agree
// with the same model's statements on the cpu, which are checked against a hand-written LSTM and
// GRU and SimpleRNN and PyTorch (tests/nn/{lstm,gru,simple_rnn,bidirectional}.test.cpp, tests/nn/peer_recurrent.test.cpp);
// so do initial and final states and Keras's mask (tests/nn/recurrent{,_mask}.test.cpp).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "fluxion/nn.hpp"
#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;
using fluxion_test::check_values;
using fluxion_test::filled;
using fluxion_test::scoped_setting;

constexpr fx::index_t steps = 5;

/// Two recurrent layers (nn::lstm or nn::gru), the first returning its sequence, then a dense
/// layer: (batch, 5, 3) -> (batch, 2). options: both recurrent layers' (none, or their
/// recurrent_options).
template <template <fx::index_t, bool, class, class> class Recurrent, class T, class Device, class... Options>
auto stacked(std::uint64_t seed, const Options&... options) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, typename nn::typed_input<T, steps, 3>::template on<Device>{},
                        Recurrent<6, true, float, fx::cpu>{options...}, Recurrent<4, false, float, fx::cpu>{options...},
                        nn::dense<2>{});
}

/// nn::bidirectional around nn::gru, for stacked<>: each half on the device, the reversals and the
/// merge as statements there.
template <fx::index_t Units, bool ReturnSequences, class T, class Device>
using bidirectional_gru = nn::bidirectional<nn::gru<Units, ReturnSequences, T, Device>>;

enum class taping { one_shot, persistent, two_tapes };

template <class T>
struct result {
  std::vector<T> output;
  std::vector<std::vector<T>> gradients;  // per trainable variable
  std::size_t entries = 0;                // the recording tape's entries after the forward pass
};

template <class T, class Model, class Device>
result<T> run(Model& model, const fx::tensor<T, Device>& x, taping how) {
  std::optional<fx::gradient_tape> outer;
  if (how == taping::two_tapes) outer.emplace();
  std::optional<fx::gradient_tape> tape;
  if (how == taping::persistent) tape.emplace(fx::persistent);
  else tape.emplace();
  const fx::tensor<T, Device> y = model(x, true);
  const fx::tensor<T, Device> loss = fx::reduce_sum(fx::square(y - T(0.25)) + y);
  result<T> r{fx::to<fx::cpu>(y).to_vector(), {}, tape->entries()};
  auto vars = model.trainable_variables();
  for (auto& g : tape->gradient(loss, vars)) r.gradients.push_back(fx::to<fx::cpu>(g).to_vector());
  return r;
}

template <class T>
void check_same(const result<T>& got, const result<T>& want, double rtol) {
  check_values(got.output, want.output, rtol);
  REQUIRE(got.gradients.size() == want.gradients.size());
  for (std::size_t i = 0; i < got.gradients.size(); ++i) {
    CAPTURE(i);
    check_values(got.gradients[i], want.gradients[i], rtol);
  }
}

/// The three ways a fused sequence runs on the device: each step's products inside its cell
/// kernel, as GEMMs before it, or the whole sequence as one persistent kernel (emulated on the
/// host under Thrust's OpenMP system, with the plan of a 3-multiprocessor device).
enum class sequence_path { inside, gemms, persistent };
constexpr sequence_path sequence_paths[] = {sequence_path::inside, sequence_path::gemms, sequence_path::persistent};

struct path_setting {
  scoped_setting<fx::index_t> limit;
  scoped_setting<bool> persistent;
  explicit path_setting(sequence_path path)
      : limit(fx::nn::detail::recurrent_product_limit(), path == sequence_path::inside ? 16384 : 0),
        persistent(fx::nn::detail::recurrent_persistent(), path == sequence_path::persistent) {}
};

template <template <fx::index_t, bool, class, class> class Recurrent, class T, class... Options>
void check_fused_against_cpu(double rtol, std::size_t per_step, std::size_t variables = 8, const Options&... options) {
  auto host = stacked<Recurrent, T, fx::cpu>(31, options...);
  auto dev = stacked<Recurrent, T, fx::cuda>(31, options...);
  const fx::tensor<T> x = filled<T>({4, steps, 3}, 32);
  const auto xd = fx::to<fx::cuda>(x);
  const result<T> want = run<T>(host, x, taping::two_tapes);  // the cpu's statements
  REQUIRE(want.gradients.size() == variables);  // 3 + 3 + 2 (twice 3 for a bidirectional layer)
  check_same(run<T>(host, x, taping::one_shot), want, rtol);    // the cpu's fused cell

  for (const sequence_path path : sequence_paths) {
    CAPTURE(static_cast<int>(path));
    const path_setting setting(path);
    using cells = fx::nn::detail::recurrent_cells<fx::cuda>;
    CHECK(cells::products_inside(4, 6) == (path == sequence_path::inside));
    CHECK_FALSE(cells::products_inside(1, fx::nn::detail::recurrent_product_max_units + 1));  // wide layers: GEMMs
    CHECK_FALSE(fx::nn::detail::recurrent_cells<fx::cpu>::products_inside(4, 6));
    const result<T> fused = run<T>(dev, xd, taping::one_shot);
    check_same(fused, want, rtol);
    // The statements record at least per_step entries a step per layer; fused, each layer's whole
    // sequence is one.
    const result<T> statements = run<T>(dev, xd, taping::two_tapes);
    check_same(statements, want, rtol);
    CHECK(fused.entries + 2 * per_step * (steps - 1) <= statements.entries);
    CHECK(statements.entries == want.entries);
    const result<T> persistent = run<T>(dev, xd, taping::persistent);
    check_same(persistent, want, rtol);
    CHECK(persistent.entries == fused.entries);

    // Inference records nothing and gives the same output.
    check_values(fx::to<fx::cpu>(dev(xd)).to_vector(), host(x).to_vector(), rtol);
  }
}

}  // namespace

// Statements a step: the LSTM's z, c and h; the GRU's x's rows, h R + b, z and r, and h; the
// SimpleRNN's x's rows and tanh(p + h R).
TEST_CASE("cuda lstm: the fused sequence gives the cpu's output and gradients, double") {
  check_fused_against_cpu<nn::lstm, double>(1e-12, 3);
}

TEST_CASE("cuda lstm: the fused sequence gives the cpu's output and gradients, float") {
  check_fused_against_cpu<nn::lstm, float>(1e-5, 3);
}

TEST_CASE("cuda gru: the fused sequence gives the cpu's output and gradients, double") {
  check_fused_against_cpu<nn::gru, double>(1e-12, 4);
}

TEST_CASE("cuda gru: the fused sequence gives the cpu's output and gradients, float") {
  check_fused_against_cpu<nn::gru, float>(1e-5, 4);
}

TEST_CASE("cuda simple_rnn: the fused sequence gives the cpu's output and gradients, double") {
  check_fused_against_cpu<nn::simple_rnn, double>(1e-12, 2);  // x's rows, then tanh(p + h R)
}

TEST_CASE("cuda simple_rnn: the fused sequence gives the cpu's output and gradients, float") {
  check_fused_against_cpu<nn::simple_rnn, float>(1e-5, 2);
}

TEST_CASE("cuda lstm, gru, simple_rnn with activation relu: the fused sequence gives the cpu's output and gradients") {
  const nn::recurrent_options relu{.activation = nn::rnn_activation::relu};
  check_fused_against_cpu<nn::lstm, double>(1e-12, 3, 8, relu);
  check_fused_against_cpu<nn::gru, double>(1e-12, 4, 8, relu);
  check_fused_against_cpu<nn::simple_rnn, double>(1e-12, 2, 8, relu);  // x's rows, then relu(p + h R)
  check_fused_against_cpu<nn::simple_rnn, float>(1e-5, 2, 8, relu);
}

TEST_CASE("cuda bidirectional gru: both halves fused, the same output and gradients as the cpu's, double") {
  check_fused_against_cpu<bidirectional_gru, double>(1e-12, 2 * 4, 14);
}

TEST_CASE("cuda lstm: a fused sequence's gradient can be asked for again on a kept tape (jacobian)") {
  // jacobian() runs the recorded entries once per output element: the fused entry's backward pass
  // must not consume what it keeps.
  auto host = stacked<nn::lstm, double, fx::cpu>(33);
  auto dev = stacked<nn::lstm, double, fx::cuda>(33);
  const fx::tensor<double> x = filled<double>({2, steps, 3}, 34);
  const auto xd = fx::to<fx::cuda>(x);
  auto jacobian_of = [](auto& model, const auto& input) {
    fx::gradient_tape tape;
    tape.watch(input);
    const auto y = model(input, true);
    return fx::to<fx::cpu>(tape.jacobian(y, input)).to_vector();
  };
  check_values(jacobian_of(dev, xd), jacobian_of(host, x), 1e-12);
}

namespace {

/// An encoder's final states (call_with_state) start a decoder (Keras's initial_state), on Device:
/// the decoder's sequence and final states, and the gradients of a loss of both with respect to
/// the input, the encoder's and the decoder's variables. `nested`: under two tapes (the statements).
/// `masked`: both take Keras's masks (padding on the right, on the left, holes, a row all padding).
template <template <fx::index_t, bool, class, class> class Recurrent, class Device>
std::vector<std::vector<double>> encoder_decoder(bool nested, bool masked = false) {
  fx::random::generator gen{35};
  Recurrent<5, false, double, Device> encoder;
  Recurrent<5, true, double, Device> decoder;
  encoder.build(fx::shape{steps, 2}, gen);  // the same variables on both devices
  decoder.build(fx::shape{4, 3}, gen);
  const auto x = fx::to<Device>(filled<double>({3, steps, 2}, 36));
  const auto y = fx::to<Device>(filled<double>({3, 4, 3}, 37));
  auto mask = [](std::vector<std::int32_t> keep, fx::index_t time) {
    return fx::to<Device>(fx::tensor<bool>(fx::from_vector(keep, {3, time}) != 0));
  };
  const fx::tensor<bool, Device> x_mask = mask({1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0}, steps),
                                 y_mask = mask({1, 1, 0, 0, 0, 1, 1, 1, 1, 0, 1, 1}, 4);
  std::optional<fx::gradient_tape> outer;
  if (nested) outer.emplace(fx::persistent);
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  const auto encoded = masked ? encoder.call_with_state(x, {.mask = &x_mask}) : encoder.call_with_state(x);
  typename decltype(decoder)::state_type carried;
  for (std::size_t i = 0; i < carried.size(); ++i) carried[i] = encoded[i + 1];
  const auto decoded = masked ? decoder.call_with_state(y, {.mask = &y_mask, .initial_state = &carried})
                              : decoder.call_with_state(y, carried);
  fx::tensor<double, Device> loss = fx::reduce_sum(fx::square(decoded[0] - 0.25));
  for (std::size_t i = 1; i < decoded.size(); ++i) loss = loss + fx::reduce_sum(decoded[i] * double(i));
  std::vector<std::vector<double>> out;
  for (const auto& t : decoded) out.push_back(fx::to<fx::cpu>(t).to_vector());
  out.push_back(fx::to<fx::cpu>(tape.gradient(loss, x)).to_vector());
  for (auto* v : {&encoder.kernel(), &encoder.recurrent_kernel(), &encoder.bias(), &decoder.kernel(),
                  &decoder.recurrent_kernel(), &decoder.bias()})
    out.push_back(fx::to<fx::cpu>(tape.gradient(loss, *v)).to_vector());
  return out;
}

void check_same_lists(const std::vector<std::vector<double>>& got, const std::vector<std::vector<double>>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    check_values(got[i], want[i], 1e-12);
  }
}

template <template <fx::index_t, bool, class, class> class Recurrent>
void check_states_against_cpu(bool masked) {
  const auto want = encoder_decoder<Recurrent, fx::cpu>(true, masked);  // the cpu's statements
  check_same_lists(encoder_decoder<Recurrent, fx::cpu>(false, masked), want);
  for (const sequence_path path : sequence_paths) {
    CAPTURE(static_cast<int>(path));
    const path_setting setting(path);
    check_same_lists(encoder_decoder<Recurrent, fx::cuda>(false, masked), want);  // fused
    check_same_lists(encoder_decoder<Recurrent, fx::cuda>(true, masked), want);   // statements
  }
}

}  // namespace

TEST_CASE("cuda lstm, gru, simple_rnn: initial and final states (call_with_state) give the cpu's values and gradients, "
          "double") {
  check_states_against_cpu<nn::lstm>(false);
  check_states_against_cpu<nn::gru>(false);
  check_states_against_cpu<nn::simple_rnn>(false);
}

TEST_CASE("cuda lstm, gru, simple_rnn: Keras's mask gives the cpu's values and gradients, fused and as statements, "
          "double") {
  check_states_against_cpu<nn::lstm>(true);
  check_states_against_cpu<nn::gru>(true);
  check_states_against_cpu<nn::simple_rnn>(true);
}

TEST_CASE("cuda sequential: embedding<...>::mask_zero's mask reaches the LSTM, attention and global_avg_pool1d on "
          "the device") {
  // Keras's text classifiers with padding: the same output and gradients as the cpu's.
  auto check = [](auto host, auto dev) {
    const fx::tensor<std::int32_t> ids =
        fx::from_vector(std::vector<std::int32_t>{3, 7, 2, 0, 0, 0, 5, 0, 1, 0, 0, 0, 0, 0, 0}, {3, 5});
    const auto ids_d = fx::to<fx::cuda>(ids);
    auto pass = [](auto& model, const auto& x) {
      fx::gradient_tape tape;
      const auto y = model(x, true);
      std::vector<std::vector<double>> out{fx::to<fx::cpu>(y).to_vector()};
      auto vars = model.trainable_variables();
      for (auto& g : tape.gradient(fx::reduce_sum(fx::square(y)), vars)) out.push_back(fx::to<fx::cpu>(g).to_vector());
      return out;
    };
    const auto want = pass(host, ids), got = pass(dev, ids_d);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      check_values(got[i], want[i], 1e-12);
    }
  };
  auto lstm_model = [](auto input) {
    fx::random::generator gen{38};
    return nn::sequential(gen, input, nn::embedding<10, 4, double>::mask_zero{}, nn::lstm<5, true, double>{},
                          nn::gru<3, false, double>{}, nn::dense<2>{});
  };
  // Keras's go_backwards and dropout (one mask per sequence, the same on both devices: drawn on the host).
  auto options_model = [](auto input) {
    fx::random::generator gen{40};
    return nn::sequential(gen, input, nn::embedding<10, 4, double>::mask_zero{},
                          nn::lstm<5, true, double>{{.dropout = 0.3, .recurrent_dropout = 0.25, .go_backwards = true, .seed = 5}},
                          nn::gru<3, false, double>{{.dropout = 0.2, .seed = 6}}, nn::dense<2>{});
  };
  auto pool_model = [](auto input) {
    fx::random::generator gen{39};
    return nn::sequential(gen, input, nn::embedding<10, 4, double>::mask_zero{}, nn::multi_head_attention<2, 3>{},
                          nn::global_avg_pool1d{}, nn::dense<2>{});
  };
  using in = nn::typed_input<std::int32_t, 5>;
  check(lstm_model(in{}), lstm_model(in::on<fx::cuda>{}));
  check(pool_model(in{}), pool_model(in::on<fx::cuda>{}));
  check(options_model(in{}), options_model(in::on<fx::cuda>{}));
}

namespace {

/// A cell that writes the products it is given, for run_sequence's own test: out[t, b, u, g] is
/// the g-th of cell (b, u)'s columns at step t, or -1 where the step has no product.
template <class P>
struct product_writer {
  using value_type = double;
  P product;
  double* out;
  fx::index_t t, batch, units, stride;
  int count;
  template <class V>
  FLUXION_HOST_DEVICE void cell(fx::index_t b, fx::index_t u) const {
    double v[4] = {-1, -1, -1, -1};
    if (product.any()) product.template columns<double>(b, u, stride, count, v);
    for (int g = 0; g < count; ++g) out[((t * batch + b) * units + u) * count + g] = v[g];
  }
};

struct product_steps {
  double* out;
  fx::index_t batch, units, stride;
  int count;
  template <class P>
  FLUXION_HOST_DEVICE product_writer<P> operator()(fx::index_t t, const P& p) const {
    return {p, out, t, batch, units, stride, count};
  }
};

/// run_sequence's products against a loop: a_t = a + (t + shift) * (batch * k), m (k, n) or its
/// transpose.
void check_sequence_products(fx::index_t units, int count, fx::index_t k, bool transposed) {
  using fx::index_t;
  const index_t batch = 3, steps = 4, n = transposed ? units : count * units, stride = transposed ? 0 : units;
  const index_t shift = transposed ? 1 : 0, none = transposed ? steps - 1 : 0;
  const fx::tensor<double> a = filled<double>({steps + 1, batch, k}, 51);
  const fx::tensor<double> m = filled<double>(transposed ? fx::shape{n, k} : fx::shape{k, n}, 52);
  const auto ad = fx::to<fx::cuda>(a), md = fx::to<fx::cuda>(m);
  fx::tensor<double, fx::cuda> out = fx::zeros<double, fx::cuda>({steps, batch, units, count});
  const fx::nn::detail::sequence_products<double> p{ad.data(), batch * k, shift, md.data(), k, n, stride, count,
                                                    none, transposed, transposed};
  const scoped_setting<bool> on(fx::nn::detail::recurrent_persistent(), true);
  REQUIRE(fx::nn::detail::recurrent_cells<fx::cuda>::run_sequence(
      batch, units, steps, p, product_steps{out.mutable_data(), batch, units, stride, count}));
  const std::vector<double> got = fx::to<fx::cpu>(out).to_vector(), av = a.to_vector(), mv = m.to_vector();
  std::vector<double> want;
  for (index_t t = 0; t < steps; ++t)
    for (index_t b = 0; b < batch; ++b)
      for (index_t u = 0; u < units; ++u)
        for (int g = 0; g < count; ++g) {
          double sum = t == none ? -1 : 0;
          if (t != none)
            for (index_t j = 0; j < k; ++j) {
              const index_t col = u + g * stride;
              sum += av[((t + shift) * batch + b) * k + j] * (transposed ? mv[col * k + j] : mv[j * n + col]);
            }
          want.push_back(sum);
        }
  check_values(got, want, 1e-13);
}

}  // namespace

TEST_CASE("cuda recurrent: the persistent sequence's plan and products (run_sequence)") {
  using fx::nn::detail::plan_sequence;
  // An H200's 132 multiprocessors and the benchmark's LSTM (128 units, batch 64): a unit a block;
  // forward rows of 128 (h), 4 lanes a row; backward rows of 512 (dz), 16 lanes, 512 threads.
  const auto forward = plan_sequence(64, 128, 64, 128, 4, 132), backward = plan_sequence(64, 128, 64, 512, 1, 132);
  CHECK(forward.block == 1);
  CHECK(forward.blocks == 128);
  CHECK(forward.lanes == 4);
  CHECK(forward.groups == 64);
  CHECK(backward.lanes == 16);
  CHECK(backward.groups == 32);
  // 600 units: 5 a block, 20 products a row, more than a block keeps: not planned.
  CHECK(plan_sequence(64, 600, 64, 600, 4, 132).blocks == 0);
  CHECK(plan_sequence(64, 600, 64, 2400, 1, 132).blocks == 120);
  const auto small = plan_sequence(3, 5, 4, 5, 4, fx::nn::detail::sequence_emulated_processors);
  CHECK(small.block == 2);  // blocks of units 0-1, 2-3 and 4
  CHECK(small.blocks == 3);
  CHECK(small.lanes == 2);
  {  // at least 4 units a block, when asked: 32 blocks of 4 units, 16 products a row
    const scoped_setting<fx::index_t> wider(fx::nn::detail::recurrent_block_units(), 4);
    const auto four = plan_sequence(64, 128, 64, 128, 4, 132);
    CHECK(four.block == 4);
    CHECK(four.blocks == 32);
    CHECK(four.lanes == 4);
    CHECK(plan_sequence(64, 3, 64, 3, 4, 132).block == 3);  // never more than the layer's units
    CHECK(plan_sequence(64, 128, 64, 128, 4, 132).blocks == 32);
    check_sequence_products(9, 4, 9, false);  // blocks of 4, 4 and 1 unit
    check_sequence_products(9, 1, 36, true);
  }

  // Off, it does nothing: the layers run their steps.
  CHECK_FALSE(fx::nn::detail::recurrent_cells<fx::cuda>::run_sequence(
      3, 5, 4, fx::nn::detail::sequence_products<double>{}, product_steps{}));
  CHECK_FALSE(fx::nn::detail::recurrent_cells<fx::cpu>::run_sequence(
      3, 5, 4, fx::nn::detail::sequence_products<double>{}, product_steps{}));

  check_sequence_products(5, 4, 5, false);   // the LSTM's forward products, last block of one unit
  check_sequence_products(6, 3, 6, false);   // the GRU's
  check_sequence_products(5, 1, 20, true);   // the LSTM's backward products: R read transposed
  check_sequence_products(7, 1, 21, true);   // the GRU's, blocks of 3 units
}
