// Gradients, from "TensorFlow Research at Scale" and the eager-mode article: a function and its
// gradients, a custom gradient for numerical stability, C++ control flow under a tape, and a
// persistent tape used twice.
#define FLUXION_MAX_DERIVATIVE_ORDER 2  // this program takes a gradient of a gradient
#include <fluxion/fluxion.hpp>

#include <iostream>

namespace fx = fluxion;

int main() {
  // square, its gradient, and the gradient of that gradient.
  auto square = [](const auto& x) { return x * x; };
  auto grad = fx::gradients_function(square);
  auto gradgrad = fx::gradients_function([&](const auto& x) { return grad(x)[0]; });
  std::cout << "square(3) = " << fx::tensor<float>(square(fx::tensor<float>(3.f))) << "\n";
  std::cout << "grad(3) = " << grad(3.f)[0] << "\n";          // 6
  std::cout << "gradgrad(3) = " << gradgrad(3.f)[0] << "\n";  // 2

  // log(1 + exp(x)): the naive gradient overflows to NaN at x = 100; the custom one is stable.
  auto log1pexp_naive = [](const auto& x) { return fx::log(1.f + fx::exp(x)); };
  auto log1pexp = fx::custom_gradient([](const auto& x) {
    auto e = fx::exp(x);
    return std::pair{fx::log(1.f + e), [e](const auto& dy) { return dy * (1.f - 1.f / (1.f + e)); }};
  });
  auto naive_grad = fx::gradients_function(log1pexp_naive);
  auto custom_grad = fx::gradients_function([&](const auto& x) { return log1pexp(x); });
  std::cout << "naive  d/dx log1pexp at 0: " << naive_grad(0.f)[0] << ", at 100: " << naive_grad(100.f)[0] << "\n";
  std::cout << "custom d/dx log1pexp at 0: " << custom_grad(0.f)[0] << ", at 100: " << custom_grad(100.f)[0] << "\n";

  // C++ `for` and `if` on tensor values under a tape: the tape sees only what ran.
  fx::tensor<float> x = 1.5f;
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<float> y = x;
  for (int i = 0; i < 4; ++i) {
    if (fx::all(y < 10.f))
      y = y * x;  // taken while y is small
    else
      y = y + x;
  }
  std::cout << "y = " << y << ", dy/dx = " << tape.gradient(y, x) << "\n";  // x^5, 5 x^4

  // A persistent tape answers several gradient() calls.
  fx::tensor<float> z = 3.f;
  fx::gradient_tape persistent(fx::persistent);
  persistent.watch(z);
  fx::tensor<float> z2 = z * z;
  fx::tensor<float> z4 = z2 * z2;
  std::cout << "dz4/dz = " << persistent.gradient(z4, z) << "\n";    // 108
  std::cout << "dz2/dz = " << persistent.gradient(z2, z) << "\n";    // 6
  std::cout << "dz4/dz2 = " << persistent.gradient(z4, z2) << "\n";  // 18
  return 0;
}
