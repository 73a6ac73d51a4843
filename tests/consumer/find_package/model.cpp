// A model-layer program built with both compile-time levers by both consumer tests: it calls every
// kind of function that FLUXION_PREBUILT_KERNELS declares `extern template` (the random draws, the
// copy/fill/add/sum statements, the layers' statements and initializers, the loss, the tape's
// gradient and the optimizer update), so a declaration without its definition in the prebuilt
// library fails to link here. Header-only builds never see those declarations.
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <cstdio>

int main() {
  namespace fx = fluxion;
  namespace nn = fluxion::nn;
  fx::random::generator gen{3};
  const fx::tensor<double> noise_d = fx::random::uniform<double>({3}, gen) + fx::random::normal<double>({3}, gen);
  const fx::tensor<std::int64_t> ints = fx::random::uniform<std::int64_t>({3}, gen, 0, 5);
  const fx::tensor<float> images = fx::random::normal<float>({4, 8, 8, 16}, gen);
  const fx::tensor<std::int32_t> labels = fx::random::uniform<std::int32_t>({4}, gen, 0, 3);

  auto model = nn::sequential(gen, nn::input<8, 8, 16>{}, nn::conv2d<32, 5, nn::same>{}, nn::relu{},
                              nn::max_pool2d<2>{}, nn::avg_pool2d<2>{}, nn::reshape<4, 32>{}, nn::permute<2, 1>{},
                              nn::lstm<8, true>{}, nn::lstm<8>{}, nn::dropout{0.1, 5}, nn::dense<3>{});
  fx::optim::adam opt{1e-2};
  float first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    fx::gradient_tape tape;
    const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(model(images, true), labels);
    auto vars = model.trainable_variables();
    auto grads = tape.gradient(loss, vars);
    opt.apply_gradients(grads, vars);
    last = loss.item();
    if (step == 0) first = last;
  }
  // Batch-1 inference (a kept Winograd transform for the 5x5 convolution) against the taped pass.
  const fx::tensor<float> one = fx::slice(images, {0, 0, 0, 0}, {1, 8, 8, 16});
  const fx::tensor<float> inferred = model(one);
  fx::tensor<float> taped;
  {
    fx::gradient_tape tape;
    taped = model(one);
  }
  const float gap = fx::tensor<float>(fx::reduce_max(fx::abs(inferred - taped))).item();
  // The tape's gradient with respect to tensors, a copy, a fill and a sum over axes.
  fx::tensor<float> x = fx::ones<float>({2, 3});
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<float> y = fx::reduce_sum(fx::square(x + x));
  const fx::tensor<float> dx = tape.gradient(y, x);
  const float dx_sum = fx::tensor<float>(fx::reduce_sum(dx, {0})).to_vector()[0];

  const bool ok = std::isfinite(last) && last < first && gap < 1e-4f && dx_sum == 16.f &&
                  std::isfinite(fx::tensor<double>(fx::reduce_sum(noise_d)).item()) && ints.size() == 3;
  std::printf("consumer model: loss %g -> %g, inference gap %g, dx %g: %s\n", static_cast<double>(first),
              static_cast<double>(last), static_cast<double>(gap), static_cast<double>(dx_sum), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
