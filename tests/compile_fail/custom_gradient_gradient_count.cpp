// expect-error: fluxion::custom_gradient: the backward function must return one gradient per argument
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>  // custom_gradient.hpp alone lacks the cpu evaluator
#include <tuple>
#include <utility>
int main() {
  auto mul = fluxion::custom_gradient([](const auto& a, const auto& b) {
    return std::pair{a * b, [b](const auto& dy) { return std::tuple{dy * b}; }};
  });
  fluxion::tensor<float> a = {1.f}, b = {2.f};
  auto y = mul(a, b);
  (void)y;
}
