// fx::fit and fx::evaluate with Keras's sample weights and masks: a sequence tagger whose mask
// (embedding<...>::mask_zero) reaches its output trains and is evaluated on its real steps only
// (the padding's labels and length change nothing; the loss and accuracy against a naive loop over
// the kept steps); (x, y, sample_weight) elements weight the loss as Keras's fit does (against the
// loss computed by hand; zero weights leave the variables unchanged), and combine with the mask;
// fit's class_weight weighs each example by its label's class (one step against the same step with
// those weights by hand) and says what is wrong with a label, a loss function or labels it cannot use.
#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace fit_weights_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

constexpr fx::index_t time_steps = 6;
using tokens = fx::tensor<std::int32_t>;
using batch = std::pair<tokens, tokens>;
template <class T>
using batch_of = std::pair<fx::tensor<T>, tokens>;

/// Rows of 1 to 6 tokens in [1, 10), padded with 0 at the end; each token's tag is token % 3, the
/// padding's `pad_tag`. `extra` more padding steps make the same batches longer.
std::vector<batch> tagged(int batches, fx::index_t rows, std::int32_t pad_tag, fx::index_t extra = 0, std::uint64_t seed = 5) {
  fx::random::generator gen{seed};
  std::vector<batch> out;
  const fx::index_t t = time_steps + extra;
  for (int b = 0; b < batches; ++b) {
    const auto lengths = fx::random::uniform<std::int32_t>({rows}, gen, 1, time_steps + 1).to_vector();
    const auto draws = fx::random::uniform<std::int32_t>({rows, time_steps}, gen, 1, 10).to_vector();
    std::vector<std::int32_t> ids, tags;
    for (fx::index_t r = 0; r < rows; ++r)
      for (fx::index_t s = 0; s < t; ++s) {
        const bool kept = s < lengths[static_cast<std::size_t>(r)];
        const std::int32_t id = kept ? draws[static_cast<std::size_t>(r * time_steps + s)] : 0;
        ids.push_back(id);
        tags.push_back(kept ? id % 3 : pad_tag);
      }
    out.emplace_back(fx::from_vector(ids, {rows, t}), fx::from_vector(tags, {rows, t}));
  }
  return out;
}

template <fx::index_t Time>
auto tagger(fx::random::generator& gen) {
  return nn::sequential(gen, nn::typed_input<std::int32_t, Time>{}, nn::embedding<10, 8>::mask_zero{}, nn::lstm<8, true>{},
                        nn::dense<3>{});
}

auto masked_loss = [](const auto& logits, const auto& labels, const auto& weights) {
  return fx::losses::sparse_softmax_cross_entropy(logits, labels, weights);
};

/// The mean loss and accuracy over the kept steps of each batch, each batch weighted by its rows
/// (as evaluate's), by a naive loop over the per-step losses and logits.
template <class Net>
std::pair<double, double> by_hand(Net& net, const std::vector<batch>& data) {
  double loss = 0, rows = 0, correct = 0, kept_steps = 0;
  for (const auto& [x, y] : data) {
    const auto out = net.output_and_mask(x);
    const fx::tensor<float> steps = fx::losses::sparse_softmax_cross_entropy(out.output, y, fx::losses::reduction::none);
    const auto l = steps.to_vector();
    const auto m = out.mask.to_vector();
    const auto logits = out.output.to_vector();
    const auto tags = y.to_vector();
    double sum = 0, kept = 0;
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (!m[i]) continue;
      sum += l[i];
      ++kept;
      std::size_t best = 0;
      for (std::size_t c = 1; c < 3; ++c)
        if (logits[i * 3 + c] > logits[i * 3 + best]) best = c;
      correct += static_cast<double>(best) == tags[i];
    }
    kept_steps += kept;
    loss += sum / kept * static_cast<double>(x.shape()[0]);
    rows += static_cast<double>(x.shape()[0]);
  }
  return {loss / rows, correct / kept_steps};
}

}  // namespace

TEST_CASE("fit and evaluate: a tagger's mask reaches the loss and the accuracy; the padding changes nothing") {
  fx::random::generator gen{3};
  auto net = tagger<time_steps>(gen);
  static_assert(decltype(net)::output_masked);
  const auto data = tagged(4, 8, 0);
  const auto want = by_hand(net, data);
  const fx::evaluation e = fx::evaluate(net, masked_loss, data);
  CHECK(e.loss == doctest::Approx(want.first).epsilon(1e-5));
  CHECK(e.accuracy == doctest::Approx(want.second).epsilon(1e-12));
  // Other tags at the padding, and two more steps of it: the same loss and accuracy.
  const fx::evaluation other_tags = fx::evaluate(net, masked_loss, tagged(4, 8, 2));
  CHECK(other_tags.loss == e.loss);
  CHECK(other_tags.accuracy == e.accuracy);
  fx::random::generator same{3};
  auto longer = tagger<time_steps + 2>(same);
  const fx::evaluation padded = fx::evaluate(longer, masked_loss, tagged(4, 8, 1, 2));
  CHECK(padded.loss == doctest::Approx(e.loss).epsilon(1e-5));
  CHECK(padded.accuracy == e.accuracy);
  // Training on the real steps learns the tags.
  fx::optim::adam opt{0.05};
  std::ostringstream log;
  const auto history = fx::fit(net, opt, masked_loss, data, {.epochs = 25, .out = &log}, tagged(2, 8, 1, 0, 9));
  CHECK(history.loss.back() < 0.5 * history.loss.front());
  CHECK(history.accuracy.back() > 0.95);
  CHECK(history.val_accuracy.back() > 0.9);
}

TEST_CASE("fit and evaluate: (x, y, sample_weight) elements weight the loss as Keras's fit does") {
  fx::random::generator gen{4};
  auto net = nn::sequential(gen, nn::input<3>{}, nn::dense<4>{});
  using element = std::tuple<fx::tensor<float>, fx::tensor<std::int32_t>, fx::tensor<float>>;
  std::vector<element> data;
  for (int b = 0; b < 3; ++b)
    data.emplace_back(fx::random::normal<float>({5, 3}, gen), fx::random::uniform<std::int32_t>({5}, gen, 0, 4),
                      fx::random::uniform<float>({5}, gen, 0.f, 2.f));
  double want = 0;
  for (const auto& [x, y, w] : data) {
    const fx::tensor<float> l = fx::losses::sparse_softmax_cross_entropy(net(x), y, fx::losses::reduction::none);
    const auto lv = l.to_vector(), wv = w.to_vector();
    double sum = 0;
    for (std::size_t i = 0; i < lv.size(); ++i) sum += lv[i] * wv[i];
    want += sum / 5 * 5;  // Keras's mean over the batch's examples, each batch weighted by its size
  }
  const fx::evaluation e = fx::evaluate(net, masked_loss, data);
  CHECK(e.loss == doctest::Approx(want / 15).epsilon(1e-5));
  // Zero weights: zero gradients, so the variables stay as they were.
  std::vector<element> ignored;
  for (const auto& [x, y, w] : data) ignored.emplace_back(x, y, fx::zeros<float>({5}));
  const auto before = net.trainable_variables()[0]->value().to_vector();
  fx::optim::sgd opt{0.5};
  std::ostringstream log;
  (void)fx::fit(net, opt, masked_loss, ignored, {.epochs = 1, .out = &log});
  CHECK(net.trainable_variables()[0]->value().to_vector() == before);
  CHECK(opt.iterations() == 3);
}

TEST_CASE("fit and evaluate: sample weights per row combine with a tagger's mask, as Keras's") {
  fx::random::generator gen{6};
  auto net = tagger<time_steps>(gen);
  using element = std::tuple<tokens, tokens, fx::tensor<float>>;
  std::vector<element> data;
  double want = 0, rows = 0;
  for (const auto& [x, y] : tagged(3, 4, 0)) {
    const fx::tensor<float> w = {2.f, 0.f, 1.f, 0.5f};
    data.emplace_back(x, y, w);
    const auto out = net.output_and_mask(x);
    const fx::tensor<float> steps = fx::losses::sparse_softmax_cross_entropy(out.output, y, fx::losses::reduction::none);
    const auto l = steps.to_vector();
    const auto m = out.mask.to_vector();
    const auto wv = w.to_vector();
    double sum = 0, kept = 0;
    for (std::size_t i = 0; i < l.size(); ++i)
      if (m[i]) {
        sum += l[i] * wv[i / time_steps];
        ++kept;
      }
    want += sum / kept * 4;
    rows += 4;
  }
  const fx::evaluation e = fx::evaluate(net, masked_loss, data);
  CHECK(e.loss == doctest::Approx(want / rows).epsilon(1e-5));
}

TEST_CASE("fit: class_weight weighs each example by its label's class, as Keras's; its errors") {
  fx::random::generator gen{7};
  auto net = nn::sequential(gen, nn::input<3>{}, nn::dense<3>{});
  fx::random::generator same{7};
  auto twin = nn::sequential(same, nn::input<3>{}, nn::dense<3>{});
  const fx::tensor<float> x = fx::random::normal<float>({6, 3}, gen);
  const fx::tensor<std::int32_t> y = {0, 2, 1, 1, 0, 2};
  const std::vector<batch_of<float>> data{{x, y}};
  fx::optim::sgd opt{0.5}, twin_opt{0.5};
  std::ostringstream log;
  (void)fx::fit(net, opt, masked_loss, data, {.epochs = 1, .out = &log, .class_weight = {1.0, 4.0, 0.25}});
  {
    fx::gradient_tape tape;
    const fx::tensor<float> w = {1.f, 0.25f, 4.f, 4.f, 1.f, 0.25f};
    const fx::tensor<float> l = fx::losses::sparse_softmax_cross_entropy(twin(x, true), y, w);
    auto vars = twin.trainable_variables();
    twin_opt.apply_gradients(tape.gradient(l, vars), vars);
  }
  const auto a = net.trainable_variables(), b = twin.trainable_variables();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto u = a[i]->value().to_vector(), v = b[i]->value().to_vector();
    for (std::size_t k = 0; k < u.size(); ++k) CHECK(u[k] == doctest::Approx(v[k]).epsilon(1e-6));
  }
  {  // int64 labels are the same classes, and checked the same way.
    fx::random::generator again{7};
    auto net64 = nn::sequential(again, nn::input<3>{}, nn::dense<3>{});
    fx::optim::sgd opt64{0.5};
    const fx::tensor<std::int64_t> y64 = {0, 2, 1, 1, 0, 2};
    const std::vector<std::pair<fx::tensor<float>, fx::tensor<std::int64_t>>> data64{{x, y64}};
    (void)fx::fit(net64, opt64, masked_loss, data64, {.epochs = 1, .out = &log, .class_weight = {1.0, 4.0, 0.25}});
    const auto c = net64.trainable_variables();
    for (std::size_t i = 0; i < c.size(); ++i) {
      const auto u = c[i]->value().to_vector(), v = b[i]->value().to_vector();
      for (std::size_t k = 0; k < u.size(); ++k) CHECK(u[k] == doctest::Approx(v[k]).epsilon(1e-6));
    }
    CHECK_THROWS_WITH_AS((void)fx::fit(net64, opt64, masked_loss, data64, {.epochs = 1, .out = &log, .class_weight = {1.0}}),
                         "fit: epoch 1, step 1 (global step 2): class_weight has weights for the classes [0, 1), but labels[1] = 2",
                         fx::out_of_range);
  }
  // A label without a weight, a loss function that cannot take weights, labels that are not classes.
  CHECK_THROWS_WITH_AS((void)fx::fit(net, opt, masked_loss, data, {.epochs = 1, .out = &log, .class_weight = {1.0, 2.0}}),
                       "fit: epoch 1, step 1 (global step 2): class_weight has weights for the classes [0, 2), but labels[1] = 2", fx::out_of_range);
  auto two_arguments = [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  };
  CHECK_THROWS_AS((void)fx::fit(net, opt, two_arguments, data, {.epochs = 1, .out = &log, .class_weight = {1, 2, 3}}),
                  fx::invalid_argument);
  const std::vector<std::pair<fx::tensor<float>, fx::tensor<float>>> regression{{x, fx::zeros<float>({6, 3})}};
  auto mse = [](const auto& p, const auto& t, const auto& w) { return fx::losses::mean_squared_error(p, t, w); };
  CHECK_THROWS_WITH_AS((void)fx::fit(net, opt, mse, regression, {.epochs = 1, .out = &log, .class_weight = {1, 2, 3}}),
                       "fit: epoch 1, step 1 (global step 2): class_weight needs integer class labels, not float32", fx::invalid_argument);
}

}  // namespace fit_weights_test
