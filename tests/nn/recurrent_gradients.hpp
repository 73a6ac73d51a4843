// The finite-difference check shared by tests/nn/recurrent.test.cpp and
// tests/nn/recurrent_mask.test.cpp: a recurrent layer's output and final states from initial
// states, with respect to the input, the initial states and the three variables (double).
#pragma once

#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <array>
#include <optional>
#include <vector>

#include "../test_util.hpp"

namespace recurrent_gradients {

namespace fx = fluxion;

/// check_gradients of call(x, initial) (call_with_state's array: the output, then the final
/// states), flattened into one vector, with respect to x, each initial state, and the kernel,
/// recurrent kernel and bias (k, r, b), which are assigned to `layer` for each evaluation.
template <class L, class Call>
fx::testing::gradient_report states_and_variables(L& layer, Call call, const fx::tensor<double>& x,
                                                  const typename L::state_type& s0, const fx::tensor<double>& k,
                                                  const fx::tensor<double>& r, const fx::tensor<double>& b) {
  const fx::testing::check_options reverse_only{.reverse = true, .forward = false};
  auto outputs = [&](const fx::tensor<double>& xi, const typename L::state_type& initial, const fx::tensor<double>& ki,
                     const fx::tensor<double>& ri, const fx::tensor<double>& bi) {
    layer.kernel().assign(ki);
    layer.recurrent_kernel().assign(ri);
    layer.bias().assign(bi);
    std::vector<fx::tensor<double>> parts;
    for (const auto& t : call(xi, initial)) parts.push_back(fx::tensor<double>(fx::reshape(t, {-1})));
    return fx::tensor<double>(fx::concat(parts, 0));
  };
  if constexpr (L::state_count == 2) {
    return fx::testing::check_gradients(
        [&](const auto& xi, const auto& h0, const auto& c0, const auto& ki, const auto& ri, const auto& bi) {
          return outputs(xi, {h0, c0}, ki, ri, bi);
        },
        reverse_only, x, s0[0], s0[1], k, r, b);
  } else {
    return fx::testing::check_gradients(
        [&](const auto& xi, const auto& h0, const auto& ki, const auto& ri, const auto& bi) {
          return outputs(xi, {h0}, ki, ri, bi);
        },
        reverse_only, x, s0[0], k, r, b);
  }
}

/// The gradients of loss() (a scalar of the layer's outputs) with respect to x, each of `states`
/// (when given) and the layer's trainable variables, recorded by one tape (the fused sequence) and
/// by nested tapes (the statements), which must agree; both lists come back (x's first).
template <class L, class Loss>
std::array<std::vector<std::vector<double>>, 2> fused_against_statements(L& layer, const fx::tensor<double>& x,
                                                                        const typename L::state_type* states,
                                                                        Loss loss) {
  std::array<std::vector<std::vector<double>>, 2> got;
  for (int nested = 0; nested < 2; ++nested) {
    std::optional<fx::gradient_tape> outer;
    if (nested) outer.emplace(fx::persistent);
    fx::gradient_tape tape{fx::persistent};
    tape.watch(x);
    if (states)
      for (const auto& s : *states) tape.watch(s);
    const fx::tensor<double> l = loss();
    got[nested].push_back(tape.gradient(l, x).to_vector());
    if (states)
      for (const auto& s : *states) got[nested].push_back(tape.gradient(l, s).to_vector());
    for (auto& g : tape.gradient(l, layer.trainable_variables())) got[nested].push_back(g.to_vector());
  }
  REQUIRE(got[0].size() == got[1].size());
  for (std::size_t i = 0; i < got[0].size(); ++i) {
    CAPTURE(i);
    test::check_close(got[0][i], got[1][i], 1e-12);
  }
  return got;
}

}  // namespace recurrent_gradients
