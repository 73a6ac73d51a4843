// Linear regression as in the reference texts' eager-execution slides: a Dense layer of one unit, a
// mean-squared-error loss, and gradient descent through an optimizer.
//
//   model = tf.layers.Dense(units=1)
//   optimizer = tf.train.GradientDescentOptimizer(learning_rate=0.1)
//   loss = tf.reduce_mean(tf.square(y - model(x)))
//   optimizer.apply_gradients(zip(tape.gradient(loss, model.variables), model.variables))
//
// It fits y = 3x + 2 + noise and prints the recovered kernel and bias.
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <iostream>

namespace fx = fluxion;

int main() {
  fx::random::generator gen{42};
  const fx::index_t n = 1000;
  const fx::tensor<float> x = fx::random::normal<float>({n, 1}, gen);
  const fx::tensor<float> noise = fx::random::normal<float>({n, 1}, gen, 0.f, 0.1f);
  const fx::tensor<float> y = 3.f * x + 2.f + noise;

  fx::nn::dense<1> model;                      // built on its first call: kernel (1, 1), bias (1)
  fx::optim::sgd optimizer{0.1f};
  auto loss = [&](const fx::tensor<float>& xs, const fx::tensor<float>& ys) {
    return fx::tensor<float>(fx::reduce_mean(fx::square(ys - model(xs))));
  };

  for (int step = 0; step < 200; ++step) {
    fx::gradient_tape tape;
    const fx::tensor<float> l = loss(x, y);
    auto vars = model.trainable_variables();
    optimizer.apply_gradients(tape.gradient(l, vars), vars);
    if (step % 50 == 0) std::cout << "step " << step << ": loss " << l.item() << "\n";
  }
  const float w = model.kernel().peek().item(), b = model.bias().peek().item();
  std::cout << "kernel = " << w << ", bias = " << b << " (want 3 and 2)\n";
  const bool ok = std::abs(w - 3.f) < 1e-2f && std::abs(b - 2.f) < 1e-2f;
  std::cout << (ok ? "recovered within 1e-2\n" : "NOT recovered within 1e-2\n");
  return ok ? 0 : 1;
}
