// Compile-time benchmark: the first program a new user writes from the README with the model layer:
// a small MLP trained on Fashion-MNIST by fx::fit with validation data, evaluated, summarized and
// saved with its optimizer. scripts/measure-compile-time.sh compiles it header-only, without the
// checkpoint (-DFIT_PROGRAM_NO_CHECKPOINT), at CMake Release's -O3, with prebuilt kernels, and with
// a top-3 metric and early stopping on it (-DFIT_PROGRAM_METRICS, stop 57: what using them costs;
// with -DFIT_PROGRAM_IOU too, stop 58, a mean IoU as well; with -DFIT_PROGRAM_OPTIMIZER=nadam, stop
// 64, another optimizer than Adam; with -DFIT_PROGRAM_REGULARIZED, stop 74, a he_normal kernel and
// an l2 regularizer on the hidden layer; with -DFIT_PROGRAM_ACTIVITY, stop 83, an
// nn::activity_regularization after it);
// README "Your own program" quotes the figures. It runs too (link fluxion::zlib, -DFLUXION_HAS_ZLIB=1),
// and trains for 2 epochs in a few seconds.
#include <fluxion/data.hpp>
#include <fluxion/fluxion.hpp>
#ifndef FIT_PROGRAM_NO_CHECKPOINT
#include <fluxion/checkpoint.hpp>
#endif

#include <iostream>

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
#ifdef FIT_PROGRAM_REGULARIZED  // stop 74: Keras's initializer and weight decay on the hidden layer
  auto net = nn::sequential(nn::input<28, 28, 1>{}, nn::flatten{},
                            nn::dense<128>{{.kernel_initializer = "he_normal", .kernel_regularizer = nn::regularizers::l2(1e-4)}},
                            nn::relu{}, nn::dropout{0.2}, nn::dense<10>{});
#elif defined(FIT_PROGRAM_ACTIVITY)  // stop 83: Keras's ActivityRegularization after the hidden layer
  auto net = nn::sequential(nn::input<28, 28, 1>{}, nn::flatten{}, nn::dense<128>{}, nn::relu{},
                            nn::activity_regularization{1e-5}, nn::dropout{0.2}, nn::dense<10>{});
#else
  auto net = nn::sequential(nn::input<28, 28, 1>{}, nn::flatten{}, nn::dense<128>{}, nn::relu{},
                            nn::dropout{0.2}, nn::dense<10>{});
#endif
#ifndef FIT_PROGRAM_OPTIMIZER  // stop 64: -DFIT_PROGRAM_OPTIMIZER=nadam measures another optimizer's cost
#define FIT_PROGRAM_OPTIMIZER adam
#endif
  fx::optim::FIT_PROGRAM_OPTIMIZER opt{1e-3};
  auto loss = [](auto logits, auto labels) { return fx::losses::sparse_softmax_cross_entropy(logits, labels); };
  auto train = fx::datasets::fashion_mnist("train").shuffle(60000, 1).batch(128).prefetch(2);
  auto test = fx::datasets::fashion_mnist("test").batch(1000);
#ifdef FIT_PROGRAM_METRICS  // stop 57: a Keras metric, and Keras 3's EarlyStopping watching it
  fx::metrics::sparse_top_k_categorical_accuracy top3{3};
#ifdef FIT_PROGRAM_IOU  // stop 58: and a confusion-matrix metric, Keras's MeanIoU of the classes
  fx::metrics::mean_iou miou{10, {.sparse_y_pred = false}};
#define FIT_PROGRAM_MORE_METRICS , &miou
#else
#define FIT_PROGRAM_MORE_METRICS
#endif
  fx::early_stopping stop{net, {.patience = 2, .monitor = "val_sparse_top_k_categorical_accuracy", .restore_best_weights = true}};
  auto history =
      fx::fit(net, opt, loss, train, {.epochs = 2, .callbacks = {&stop}, .metrics = {&top3 FIT_PROGRAM_MORE_METRICS}}, test);
#else
  auto history = fx::fit(net, opt, loss, train, {.epochs = 2}, test);
#endif
  fx::evaluation r = fx::evaluate(net, loss, test);
  std::cout << "test loss " << r.loss << " accuracy " << r.accuracy << "\n";
  std::cout << net.summary();
#ifndef FIT_PROGRAM_NO_CHECKPOINT
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}};
  ckpt.save("fit_program.safetensors");
#endif
  return 0;
}
