// A model-layer program built with both compile-time levers by both consumer tests: it calls every
// kind of function that FLUXION_PREBUILT_KERNELS declares `extern template` (the random draws, the
// copy/fill/add/sum statements, the layers' statements and initializers, the loss, the tape's
// gradient and the optimizer update), and every checkpoint, safetensors and summary function that
// src/io.cpp compiles (io/prebuilt.hpp), so a declaration without its definition in the prebuilt
// library fails to link here. Header-only builds never see those declarations.
#include <fluxion/checkpoint.hpp>
#include <fluxion/fluxion.hpp>
#include <fluxion/tensorboard.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

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
  // Keras's other activations after dense and conv2d layers: a training step and inference each.
  // The normalizations' statements (batch_norm and layer_norm with and without a relu after them,
  // group_norm) are in the library's main set (nn/prebuilt.hpp).
  // Built with ACTIVATIONS (the find_package consumer) every one of their declarations must link
  // to src/nn_activation_kernels.cpp; without (add_subdirectory) the program compiles them.
  auto activations = nn::sequential(gen, nn::input<4, 4, 2>{}, nn::conv2d<3, 3, nn::same>{}, nn::silu{},
                                    nn::conv2d<3, 3, nn::same>{}, nn::leaky_relu{}, nn::batch_norm<>{}, nn::relu{},
                                    nn::global_avg_pool2d{}, nn::group_norm<3>{}, nn::layer_norm{}, nn::relu{},
                                    nn::batch_norm<>{}, nn::layer_norm{}, nn::dense<6>{}, nn::elu{}, nn::dense<6>{}, nn::selu{}, nn::dense<6>{},
                                    nn::leaky_relu{0.1}, nn::dense<6>{}, nn::relu6{}, nn::dense<6>{}, nn::silu{},
                                    nn::dense<6>{}, nn::softplus{}, nn::dense<6>{}, nn::softsign{}, nn::dense<6>{},
                                    nn::mish{}, nn::dense<3>{});
  const fx::tensor<float> small = fx::random::normal<float>({4, 4, 4, 2}, gen);
  float activations_loss = 0;
  {
    fx::gradient_tape tape;
    const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(activations(small, true), labels);
    auto vars = activations.trainable_variables();
    fx::optim::sgd sgd{0.1};  // an optimizer of its own: its layers' names are the first model's
    sgd.apply_gradients(tape.gradient(loss, vars), vars);
    activations_loss = loss.item();
  }
  const bool activations_ok =
      std::isfinite(activations_loss) && std::isfinite(fx::reduce_sum(activations(small)).item());
  // A GRU (both forms: the whole sequence and the last state) inside a bidirectional wrapper and
  // alone: by default (find_package) they link to src/nn_gru_kernels.cpp; with NO_GRU
  // (add_subdirectory) the program compiles them itself. A SimpleRNN between them: find_package's
  // program asks for its set (SIMPLE_RNN, src/nn_simple_rnn_kernels.cpp), add_subdirectory's not.
  auto recurrent = nn::sequential(gen, nn::input<5, 3>{}, nn::bidirectional<nn::gru<4, true>>{},
                                  nn::simple_rnn<4, true>{}, nn::gru<3>{}, nn::dense<3>{});
  const fx::tensor<float> sequences = fx::random::normal<float>({4, 5, 3}, gen);
  float recurrent_loss = 0;
  {
    fx::gradient_tape tape;
    const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(recurrent(sequences, true), labels,
                                                                            fx::losses::label_smoothing{0.1});
    auto vars = recurrent.trainable_variables();
    fx::optim::sgd sgd{0.1};
    sgd.apply_gradients(tape.gradient(loss, vars), vars);
    recurrent_loss = loss.item();
  }
  const bool recurrent_ok = std::isfinite(recurrent_loss) && std::isfinite(fx::reduce_sum(recurrent(sequences)).item());

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

  // A checkpoint of each kind of object (model, optimizer, variables of three element types, an
  // integer, a generator) through a manager: saved, overwritten, restored to the saved values.
  fx::variable<double> vd{fx::ones<double>({2}), "vd"};
  fx::variable<std::int64_t> vi{fx::tensor<std::int64_t>(std::int64_t{7}), "vi"};
  std::int64_t counter = 11;
  fx::random::generator rng{9};
  fx::checkpoint ckpt{{"model", model}, {"optimizer", opt}, {"vd", vd}, {"vi", vi}, {"counter", counter}, {"rng", rng}};
  fx::checkpoint_manager manager{ckpt, "consumer_checkpoints", {.max_to_keep = 2}};
  for (std::int64_t step : {1, 2, 3}) manager.save(step);
  fx::variable<float>& kernel = *model.trainable_variables()[0];
  const std::vector<float> saved_kernel = kernel.peek().to_vector();
  const std::int64_t saved_iterations = opt.iterations();
  const double saved_draw = fx::random::uniform<double>({1}, rng).item();  // and the generator moved on
  kernel.assign(fx::zeros<float>(kernel.shape()));
  vd.assign(fx::zeros<double>({2}));
  vi.assign(fx::tensor<std::int64_t>(std::int64_t{0}));
  counter = 0;
  opt.set_iterations(0);
  const auto latest = fx::latest_checkpoint("consumer_checkpoints");
  if (latest) ckpt.restore(*latest);
  bool refused = false;  // a checkpoint whose objects the file lacks is refused, naming the tensor
  try {
    fx::variable<float> other{fx::ones<float>({1}), "other"};
    fx::checkpoint({{"other", other}}).restore(*latest);
  } catch (const fx::io_error& e) {
    refused = std::string(e.what()).find("'other' is missing") != std::string::npos;
  }
  fx::io::safetensors file;  // the raw file API, one tensor per element type
  file.add("f", fx::tensor<float>(fx::ones<float>({2})));
  file.add("d", fx::tensor<double>(fx::ones<double>({2})));
  file.add("i", fx::tensor<std::int32_t>(std::int32_t{5}));
  file.add("l", fx::tensor<std::int64_t>(std::int64_t{6}));
  file.save("consumer_checkpoints/raw.safetensors");
  const fx::io::safetensors read = fx::io::safetensors::load("consumer_checkpoints/raw.safetensors");
  // TensorBoard summaries of each prebuilt kind, and the callback fit would call.
  fx::summary_writer log{"consumer_checkpoints/logs"};
  log.scalar("f", 1.5f, 1);
  log.scalar("d", 2.5, 1);
  log.scalar("t", fx::tensor<float>(3.5f), 1);
  log.histogram("h", fx::tensor<float>(fx::ones<float>({4})), 1);
  log.image("i", fx::tensor<float>(fx::ones<float>({2, 3})), 1);
  fx::tensorboard_callback tensorboard{log, 1, &opt};
  fx::fit_logs logs;
  logs.global_step = 1;
  tensorboard.on_batch_end(logs);     // loss and learning_rate (no accuracy)
  tensorboard.on_train_end(logs);
  const bool logged = log.events() == 7;  // five summaries, then the callback's loss and learning rate

  const bool restored = latest && manager.checkpoints().size() == 2 && kernel.peek().to_vector() == saved_kernel &&
                        opt.iterations() == saved_iterations && vd.peek().to_vector() == std::vector<double>{1, 1} &&
                        vi.peek().item() == 7 && counter == 11 &&
                        fx::random::uniform<double>({1}, rng).item() == saved_draw && refused &&
                        read.get<float>("f").to_vector()[1] == 1.f && read.get<double>("d").to_vector()[1] == 1.0 &&
                        read.get<std::int32_t>("i").item() == 5 && read.get<std::int64_t>("l").item() == 6;

  const bool ok = std::isfinite(last) && last < first && gap < 1e-4f && dx_sum == 16.f &&
                  std::isfinite(fx::tensor<double>(fx::reduce_sum(noise_d)).item()) && ints.size() == 3 && restored &&
                  logged && activations_ok && recurrent_ok;
  std::printf("consumer model: loss %g -> %g, inference gap %g, dx %g, checkpoint %s, summaries %s, activations %s, "
              "gru and simple_rnn %s: %s\n",
              static_cast<double>(first), static_cast<double>(last), static_cast<double>(gap), static_cast<double>(dx_sum),
              restored ? "restored" : "NOT restored", logged ? "written" : "NOT written",
              activations_ok ? "ok" : "NOT finite", recurrent_ok ? "ok" : "NOT finite", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
