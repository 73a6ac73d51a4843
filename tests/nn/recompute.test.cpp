// fx::nn::recompute<L>: gradients equal to those of the same layers stored (first and second order),
// batch norm's moving statistics updated once, activation memory of sqrt(n) segments against
// ordinary backpropagation, composition with reversible blocks, names.
#define FLUXION_MAX_DERIVATIVE_ORDER 2  // the second-derivative case
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

template <class T>
double max_abs_diff(const fx::tensor<T>& a, const fx::tensor<T>& b) {
  REQUIRE(a.shape() == b.shape());
  const auto x = a.to_vector(), y = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
  return m;
}

using segment = nn::sequential_t<nn::typed_input<double, 6>, nn::dense<6>, nn::tanh, nn::dense<6>, nn::tanh>;

/// The same weights in a plain model and in one whose two segments are recomputed.
struct twins {
  fx::random::generator gen{12};
  nn::sequential_model<double, nn::static_shape<6>, fx::cpu, segment, segment, nn::dense<2, double>> plain{gen, segment{}, segment{}, nn::dense<2, double>{}};
  nn::sequential_model<double, nn::static_shape<6>, fx::cpu, nn::recompute<segment>, nn::recompute<segment>, nn::dense<2, double>> checkpointed{
      gen, nn::recompute<segment>{}, nn::recompute<segment>{}, nn::dense<2, double>{}};
  twins() {
    auto a = plain.variables(), b = checkpointed.variables();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) b[i]->assign(a[i]->peek());
  }
};

}  // namespace

TEST_CASE("recompute: the same gradients as the stored layers, for the input and every variable") {
  twins m;
  fx::random::generator gen{3};
  const fx::tensor<double> x = fx::random::normal<double>({5, 6}, gen);
  auto grads = [&](auto& net) {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> loss = fx::reduce_sum(fx::square(net(x, true)));
    std::vector<const fx::tensor<double>*> sources{&x};
    for (auto* v : net.trainable_variables()) sources.push_back(&v->peek());
    return tape.gradient(loss, sources);
  };
  const auto a = grads(m.plain), b = grads(m.checkpointed);
  REQUIRE(a.size() == b.size());
  REQUIRE(a.size() == 1 + 2 * 4 + 2);
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(fx::tensor<double>(fx::reduce_max(fx::abs(a[i]))).item() > 0);
    CHECK(max_abs_diff(a[i], b[i]) <= 1e-14);
  }
  CHECK(m.checkpointed.trainable_variables()[0]->name() == "recompute/dense/kernel");
  CHECK(m.checkpointed.trainable_variables()[4]->name() == "recompute_1/dense/kernel");
}

TEST_CASE("recompute: second derivatives through a recomputed segment (nested tapes)") {
  twins m;
  fx::random::generator gen{4};
  const fx::tensor<double> x = fx::random::normal<double>({3, 6}, gen);
  const fx::tensor<double> v = fx::random::normal<double>({3, 6}, gen);
  auto hvp = [&](auto& net) {  // the Hessian of sum(net(x)^2) times v
    fx::gradient_tape outer;
    outer.watch(x);
    fx::tensor<double> g;
    {
      fx::gradient_tape inner;
      inner.watch(x);
      fx::tensor<double> loss = fx::reduce_sum(fx::square(net(x)));
      g = inner.gradient(loss, x);
    }
    return outer.gradient(fx::tensor<double>(fx::reduce_sum(g * v)), x);
  };
  const auto a = hvp(m.plain), b = hvp(m.checkpointed);
  CHECK(fx::tensor<double>(fx::reduce_max(fx::abs(a))).item() > 0);
  CHECK(max_abs_diff(a, b) <= 1e-12);
}

TEST_CASE("recompute: batch norm inside a segment updates its moving statistics once per step") {
  using bn_segment = nn::sequential_t<nn::typed_input<double, 4>, nn::dense<4>, nn::batch_norm<-1, double>, nn::relu>;
  fx::random::generator gen{5};
  nn::recompute<bn_segment> seg;
  seg.initialize(gen);
  bn_segment plain;
  auto pv = plain.variables(), sv = seg.layer().variables();
  const fx::tensor<double> x = fx::random::normal<double>({8, 4}, gen);
  for (std::size_t i = 0; i < pv.size(); ++i) pv[i]->assign(fx::tensor<double>(sv[i]->peek() * 1.0));
  auto step = [&](auto& layer) {
    fx::gradient_tape tape;
    fx::tensor<double> loss = fx::reduce_sum(fx::square(layer(x, true)));
    return tape.gradient(loss, layer.trainable_variables());
  };
  const auto ga = step(plain), gb = step(seg);
  REQUIRE(ga.size() == gb.size());
  for (std::size_t i = 0; i < ga.size(); ++i) CHECK(max_abs_diff(ga[i], gb[i]) <= 1e-12);
  const auto moving_plain = plain.non_trainable_variables(), moving_seg = seg.layer().non_trainable_variables();
  REQUIRE(moving_plain.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) CHECK(max_abs_diff(moving_plain[i]->peek(), moving_seg[i]->peek()) == 0);
}

TEST_CASE("recompute: sqrt(n) segments of a deep plain network keep a fraction of its activations") {
  // 64 dense layers of 64 units at batch 256 in 8 segments of 8: activations (64 KiB a tensor)
  // dominate the weights (16 KiB a layer).
  using eight = nn::sequential_t<nn::input<64>, nn::dense<64>, nn::relu, nn::dense<64>, nn::relu, nn::dense<64>,
                                 nn::relu, nn::dense<64>, nn::relu, nn::dense<64>, nn::relu, nn::dense<64>, nn::relu,
                                 nn::dense<64>, nn::relu, nn::dense<64>, nn::relu>;
  using seg = nn::recompute<eight>;
  fx::random::generator gen{6};
  auto plain = nn::sequential(gen, nn::input<64>{}, eight{}, eight{}, eight{}, eight{}, eight{}, eight{}, eight{}, eight{});
  auto checkpointed = nn::sequential(gen, nn::input<64>{}, seg{}, seg{}, seg{}, seg{}, seg{}, seg{}, seg{}, seg{});
  const fx::tensor<float> x = fx::random::normal<float>({256, 64}, gen);
  auto peak = [&](auto& net) {
    fx::memory::reset_peak();
    const auto base = fx::memory_stats().bytes_in_use;
    {
      fx::gradient_tape tape;
      fx::tensor<float> loss = fx::reduce_sum(fx::square(net(x, true)));
      auto g = tape.gradient(loss, net.trainable_variables());
      CHECK(g.size() == 128);
    }
    return static_cast<double>(fx::memory_stats().peak_bytes_in_use - base);
  };
  const double a = peak(plain), b = peak(checkpointed);
  MESSAGE("peak bytes of a step: stored ", a, ", recomputed in 8 segments ", b, " (", b / a, ")");
  CHECK(b <= 0.35 * a);
}

TEST_CASE("recompute: a recomputed reversible sequence, and inference without a tape") {
  using half = nn::sequential_t<nn::typed_input<double, 3>, nn::dense<3>, nn::tanh>;
  using rev = nn::reversible_sequence<half, half, 2, double>;
  fx::random::generator gen{7};
  rev plain(gen);
  nn::recompute<rev> wrapped;
  auto pv = plain.variables(), wv = wrapped.layer().variables();
  REQUIRE(pv.size() == wv.size());
  for (std::size_t i = 0; i < pv.size(); ++i) wv[i]->assign(pv[i]->peek());
  const fx::tensor<double> x = fx::random::normal<double>({4, 6}, gen);
  auto grads = [&](auto& layer) {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> loss = fx::reduce_sum(fx::square(layer(x, true)));
    return tape.gradient(loss, x);
  };
  CHECK(max_abs_diff(grads(plain), grads(wrapped)) <= 1e-12);
  CHECK(max_abs_diff(plain(x), wrapped(x)) == 0);
}

TEST_CASE("recompute: dropout inside a segment replays its forward mask in the backward pass") {
  using drop_segment = nn::sequential_t<nn::typed_input<double, 8>, nn::dense<8>, nn::relu, nn::dropout, nn::dense<8>>;
  fx::random::generator gen{9};
  drop_segment plain(gen, nn::dense<8, double>{}, nn::relu{}, nn::dropout{0.5, 21}, nn::dense<8, double>{});
  nn::recompute<drop_segment> seg(drop_segment(gen, nn::dense<8, double>{}, nn::relu{}, nn::dropout{0.5, 21}, nn::dense<8, double>{}));
  auto pv = plain.trainable_variables(), sv = seg.trainable_variables();
  REQUIRE(pv.size() == sv.size());
  for (std::size_t i = 0; i < pv.size(); ++i) sv[i]->assign(pv[i]->peek());
  const fx::tensor<double> x = fx::random::normal<double>({16, 8}, gen);
  for (int step = 0; step < 2; ++step) {  // a new mask each step, the same in both
    fx::gradient_tape ta;
    fx::tensor<double> la = fx::reduce_sum(fx::square(plain(x, true)));
    const auto ga = ta.gradient(la, plain.trainable_variables());
    fx::gradient_tape tb;
    fx::tensor<double> lb = fx::reduce_sum(fx::square(seg(x, true)));
    const auto gb = tb.gradient(lb, seg.trainable_variables());
    CHECK(la.item() == lb.item());
    REQUIRE(ga.size() == gb.size());
    for (std::size_t i = 0; i < ga.size(); ++i) CHECK(max_abs_diff(ga[i], gb[i]) <= 1e-12);
  }
}
