// Trains the TF tutorial's convolutional network on Fashion-MNIST: conv 32 5x5 same, max pool 2,
// conv 64 5x5 same, max pool 2, dense 1024, dropout 0.4, dense 10, with Adam. It shows the whole
// training story of fluxion: the data pipeline (IDX files through zlib, shuffled, batched and
// prefetched on a background thread), a compile-time-checked model, fx::fit with its progress bar,
// TensorBoard logs (runs/fashion_mnist_cnn: `tensorboard --logdir build/examples/runs`), and the
// test accuracy at the end.
//
//   ./scripts/run-example.sh                       # installs the data set, builds, trains 12 epochs
//   build/examples/fashion_mnist_cnn --epochs 3 --steps 100 --data /path/to/fashion-mnist
//   build/examples/fashion_mnist_cnn --resume      # continue from checkpoints/fashion_mnist_cnn
//   fashion_mnist_cnn --device cuda                # the same network on the GPU (a build by nvcc:
//                                                  # scripts/run-gpu-tests.sh builds it too)
//
// The data set comes from Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), or
// from --data / FLUXION_DATASETS_DIR. On the GPU the batches are uploaded by the prefetch thread
// (prefetch_to), and the model, Adam's moments and the checkpoints' values live on the device; the
// code is the cpu's, with the device as a template argument.
#include <fluxion/checkpoint.hpp>
#include <fluxion/data.hpp>
#include <fluxion/fluxion.hpp>
#include <fluxion/tensorboard.hpp>
#if defined(__CUDACC__) || defined(THRUST_DEVICE_SYSTEM)  // nvcc, or Thrust's OpenMP system in CI
#include <fluxion/cuda.hpp>
#define FASHION_MNIST_CNN_DEVICE 1
#else
#define FASHION_MNIST_CNN_DEVICE 0
#endif

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <type_traits>

namespace fx = fluxion;
namespace nn = fluxion::nn;

struct options {
  int epochs = 12;
  std::int64_t steps = -1;  // per epoch; -1: the whole training set
  std::string data_dir;
  bool resume = false;
};

/// The pipeline's batches on Device: prefetched on the cpu, or uploaded by the prefetch thread.
template <class Device, class Dataset>
auto on_device(const Dataset& d) {
  if constexpr (std::is_same_v<Device, fx::cpu>) return d.prefetch(2);
  else return d.template prefetch_to<Device>(2);
}

template <class Device>
int train(const options& o) {
  const fx::index_t batch = 64;
  auto train = on_device<Device>(fx::datasets::fashion_mnist("train", o.data_dir).shuffle(60000, /*seed=*/42).batch(batch));
  auto test = on_device<Device>(fx::datasets::fashion_mnist("test", o.data_dir).batch(1000));

  fx::random::generator gen{2026};
  auto net = nn::sequential(gen, typename nn::input<28, 28, 1>::template on<Device>{},
                            nn::conv2d<32, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::conv2d<64, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::flatten{}, nn::dense<1024>{}, nn::relu{}, nn::dropout{0.4, 7}, nn::dense<10>{});
  std::cout << net.summary();
  fx::optim::adam opt{1e-3};
  auto loss = [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  };
  // Checkpoints of the model, the optimizer (its moments and step) and dropout's random stream,
  // every epoch and on Ctrl-C; --resume continues the run from the latest one: the same step, the
  // same batches in the same order (epoch n is the pipeline's pass n), the same dropout masks.
  // They hold the values, not the device: a run saved on one device resumes on the other.
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"dropout", net.template layer<9>().generator()}};
  fx::checkpoint_manager checkpoints{ckpt, "checkpoints/fashion_mnist_cnn", {.max_to_keep = 3}};
  if (o.resume) {
    if (auto path = checkpoints.restore_latest()) std::cout << "resumed from " << *path << " at step " << opt.iterations() << "\n";
  }
  fx::checkpoint_callback saver{checkpoints};
  fx::summary_writer log{"runs/fashion_mnist_cnn"};
  fx::tensorboard_callback tensorboard{log, /*every_steps=*/10, &opt};
  const auto history = fx::fit(net, opt, loss, train,
                               {.epochs = o.epochs, .steps_per_epoch = o.steps, .callbacks = {&tensorboard, &saver}, .resume = o.resume});

  const fx::evaluation result = fx::evaluate(net, loss, test);  // Keras's model.evaluate
  std::cout << "test accuracy: " << result.accuracy << " (" << result.samples << " images)\n";
  log.scalar("test_accuracy", result.accuracy, opt.iterations());
  std::cout << "checkpoint: " << saver.last_saved() << "\n";
  if (history.interrupted) std::cout << "stopped by Ctrl-C; --resume continues from the checkpoint\n";
  return 0;
}

int main(int argc, char** argv) {
  options o;
  std::string device = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fashion_mnist_cnn: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--epochs") o.epochs = std::stoi(value());
    else if (arg == "--steps") o.steps = std::stoll(value());
    else if (arg == "--data") o.data_dir = value();
    else if (arg == "--resume") o.resume = true;
    else if (arg == "--device") device = value();
    else {
      std::cerr << "usage: fashion_mnist_cnn [--epochs N] [--steps N] [--data DIR] [--resume] [--device cpu|cuda]\n";
      return 2;
    }
  }
  if (device != "cpu" && device != "cuda") {
    std::cerr << "fashion_mnist_cnn: --device " << device << ": the devices are cpu and cuda\n";
    return 2;
  }

  try {
    if (device == "cpu") return train<fx::cpu>(o);
#if FASHION_MNIST_CNN_DEVICE
    return train<fx::cuda>(o);
#else
    std::cerr << "fashion_mnist_cnn: this build has no CUDA device; compile the example with nvcc (as "
                 "scripts/run-gpu-tests.sh does) to train on a GPU\n";
    return 2;
#endif
  } catch (const fx::error& e) {
    std::cerr << "fashion_mnist_cnn: " << e.what() << "\n";
    return 1;
  }
}
