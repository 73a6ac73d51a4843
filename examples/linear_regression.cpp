// Linear regression with two variables and implicit_gradients, as in the TF eager slides: fit
// y = 3x + 2 + noise and print the recovered weights.
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <iostream>

namespace fx = fluxion;

int main() {
  fx::random::generator gen{42};
  const fx::index_t n = 1000;
  fx::tensor<float> x = fx::random::normal<float>({n}, gen);
  fx::tensor<float> noise = fx::random::normal<float>({n}, gen, 0.f, 0.1f);
  fx::tensor<float> y = 3.f * x + 2.f + noise;

  fx::variable<float> w{fx::tensor<float>(0.f), "w"};
  fx::variable<float> b{fx::tensor<float>(0.f), "b"};
  auto loss = [&] { return fx::reduce_mean(fx::square(y - (w * x + b))); };
  auto grads_of = fx::implicit_gradients(loss);

  const float learning_rate = 0.1f;
  for (int step = 0; step < 200; ++step) {
    for (auto& [g, v] : grads_of()) v->assign_sub(learning_rate * g);
    if (step % 50 == 0) std::cout << "step " << step << ": loss " << fx::tensor<float>(loss()).item() << "\n";
  }
  const float wv = w.value().item(), bv = b.value().item();
  std::cout << "w = " << wv << ", b = " << bv << " (want 3 and 2)\n";
  const bool ok = std::abs(wv - 3.f) < 1e-2f && std::abs(bv - 2.f) < 1e-2f;
  std::cout << (ok ? "recovered within 1e-2\n" : "NOT recovered within 1e-2\n");
  return ok ? 0 : 1;
}
