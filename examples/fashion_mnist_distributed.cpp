// Trains a Fashion-MNIST classifier on several processes at once, synchronously data-parallel over
// MPI (as Horovod does, or tf.distribute's MultiWorkerMirroredStrategy): each process reads its own
// shard of the training set, computes the gradients of its batches, and every step averages them
// over the processes in one all-reduce, so that every process takes the same step and holds the
// same model. The processes may be on one machine or on many (the hosts are mpirun's business).
//
//   mpirun -np 2 build/examples/fashion_mnist_distributed             # 2 processes, 3 epochs
//   mpirun -np 4 --host a,b,c,d build/examples/fashion_mnist_distributed --epochs 5
//   build/examples/fashion_mnist_distributed --threads 2 --batch 128    # one process, the same steps
//
// It needs Open MPI or MPICH (scripts/install-deps.sh installs Open MPI) and links the CMake target
// fluxion::mpi. The data set comes from Debian's dataset-fashion-mnist, or from --data.
#include <fluxion/checkpoint.hpp>
#include <fluxion/data.hpp>
#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

namespace fx = fluxion;
namespace nn = fluxion::nn;

struct options {
  int epochs = 3;
  std::int64_t steps = -1;  // per epoch; -1: the whole shard
  int threads = 1;          // per process: the processes share the machine's cores
  fx::index_t batch = 64;   // per process and step: the global batch is batch x processes
  std::string data_dir;
};

int train(const fx::distributed::communicator& comm, const options& o) {
  fx::set_num_threads(o.threads);
  const bool first = comm.rank() == 0;
  // o.batch examples per process and step. Shard first, so that the processes' examples are
  // disjoint; drop_remainder, so that every process takes as many steps.
  const fx::index_t batch = o.batch;
  auto train = fx::datasets::fashion_mnist("train", o.data_dir)
                   .shard(comm.size(), comm.rank())
                   .shuffle(60000, /*seed=*/42)
                   .batch(batch, /*drop_remainder=*/true)
                   .prefetch(2);
  // Every process evaluates the whole test set with the same weights, so all report the same accuracy.
  auto test = fx::datasets::fashion_mnist("test", o.data_dir).batch(1000);

  // Each process may start from its own random weights: fit gives every one process 0's.
  fx::random::generator gen{2026};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::flatten{}, nn::dense<256>{}, nn::relu{},
                            nn::dense<10>{});
  fx::optim::adam adam{1e-3};
  fx::distributed::data_parallel opt{comm, adam};
  auto loss = [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  };
  if (first) std::cout << "data-parallel training on " << comm.size() << " processes, " << batch * comm.size() << " images a step\n";
  // The progress bar and the checkpoint from process 0 alone; the logs it prints are every
  // process's (the loss and accuracy over all of the epoch's images).
  const auto history = fx::fit(net, opt, loss, train, {.epochs = o.epochs, .steps_per_epoch = o.steps, .verbose = first ? 1 : 0});
  const fx::evaluation result = fx::evaluate(net, loss, test);
  if (first) {
    std::cout << "test accuracy: " << result.accuracy << " (" << result.samples << " images), " << history.steps
              << " steps\n";
    fx::checkpoint{{"model", net}, {"optimizer", adam}}.save("checkpoints/fashion_mnist_distributed.safetensors");
    std::cout << "checkpoint: checkpoints/fashion_mnist_distributed.safetensors\n";
  }
  return 0;
}

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fashion_mnist_distributed: " << arg << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--epochs") o.epochs = std::stoi(value());
    else if (arg == "--steps") o.steps = std::stoll(value());
    else if (arg == "--threads") o.threads = std::stoi(value());
    else if (arg == "--batch") o.batch = std::stoll(value());
    else if (arg == "--data") o.data_dir = value();
    else {
      std::cerr << "usage: [mpirun -np N] fashion_mnist_distributed [--epochs N] [--steps N] [--batch N] [--threads N] [--data DIR]\n";
      return 2;
    }
  }
  fx::distributed::communicator comm{argc, argv};
  try {
    return train(comm, o);
  } catch (const fx::error& e) {
    // The other processes may be waiting for this one in a collective: end them all (MPI_Abort).
    std::cerr << "fashion_mnist_distributed: process " << comm.rank() << ": " << e.what() << "\n";
    comm.abort(1);
  }
}
