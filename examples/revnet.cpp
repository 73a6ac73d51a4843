// A small RevNet (Gomez et al. 2017, the first reference text) on CIFAR-shaped input: three stages of
// reversible blocks on 32x32x32, 16x16x64 and 8x8x128 (NHWC), stride-2 convolutions between them,
// batch norm, global average pooling and a dense classifier. Each block's F and G are batch norm,
// relu, 3x3 conv, batch norm, relu, 3x3 conv on half the channels, as the reference's Residual.
//
// It prints what the reference text checks and reports:
//   1. the reversible gradients against ordinary backpropagation of the same model (the tape);
//   2. the activation memory of a training step, reversible and ordinary, at 3 and 9 blocks per
//      stage (RevNet-38-like and RevNet-110-like: 36 and 108 convolutions in blocks), and the step
//      time of each;
//   3. the same for RevNet-110-like with exact reversal (set_fixed_point(16): the couplings on a
//      fixed-point grid, so that float reconstruction is bit for bit);
//   4. a few Adam steps of training, with the loss.
// The data are synthetic (random images whose class is the brightest colour channel, so that the
// loss can fall), or CIFAR-10's binary files with --cifar DIR (data_batch_1.bin).
//
//   build/examples/revnet                       # checks, figures, 20 training steps
//   build/examples/revnet --steps 5 --batch 8   # quicker
//   build/examples/revnet --cifar ~/cifar-10-batches-bin
#include <fluxion/fluxion.hpp>

#include "revnet_model.hpp"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;
using revnet_model::revnet;
using revnet_model::set_reversible;

struct batch {
  fx::tensor<float> images;  // (n, 32, 32, 3)
  fx::tensor<std::int32_t> labels;
};

/// Random images whose label is the colour channel with the largest mean (plus 7 other classes'
/// worth of noise in the labels' range, so 10 classes).
batch synthetic(fx::index_t n, fx::random::generator& gen) {
  fx::tensor<float> images = fx::random::uniform<float>({n, 32, 32, 3}, gen);
  const std::vector<float> v = images.to_vector();
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  for (fx::index_t i = 0; i < n; ++i) {
    double sum[3] = {0, 0, 0};
    for (fx::index_t p = 0; p < 32 * 32; ++p)
      for (int c = 0; c < 3; ++c) sum[c] += v[static_cast<std::size_t>((i * 1024 + p) * 3 + c)];
    labels[static_cast<std::size_t>(i)] = sum[0] >= sum[1] && sum[0] >= sum[2] ? 0 : sum[1] >= sum[2] ? 1 : 2;
  }
  return {images, fx::from_vector(labels, {n})};
}

/// The first n images of CIFAR-10's data_batch_1.bin: a label byte, then 3 planes of 32x32.
batch cifar(const std::string& dir, fx::index_t n) {
  const std::string path = dir + "/data_batch_1.bin";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw fx::io_error("revnet: cannot open " + path);
  std::vector<float> images(static_cast<std::size_t>(n * 32 * 32 * 3));
  std::vector<std::int32_t> labels(static_cast<std::size_t>(n));
  std::vector<unsigned char> record(1 + 3 * 1024);
  for (fx::index_t i = 0; i < n; ++i) {
    if (!in.read(reinterpret_cast<char*>(record.data()), static_cast<std::streamsize>(record.size())))
      throw fx::io_error("revnet: " + path + " ends at record " + std::to_string(i) + " (byte offset " +
                         std::to_string(i * 3073) + "); a CIFAR-10 batch file has 10000 records of 3073 bytes");
    labels[static_cast<std::size_t>(i)] = record[0];
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p)
        images[static_cast<std::size_t>((i * 1024 + p) * 3 + c)] = static_cast<float>(record[static_cast<std::size_t>(1 + c * 1024 + p)]) / 255.f;
  }
  return {fx::from_vector(images, {n, 32, 32, 3}), fx::from_vector(labels, {n})};
}

struct step_figures {
  double activation_bytes, seconds;
  std::vector<fx::tensor<float>> grads;
};

/// One training step's gradients (no update), its activation memory (peak minus what was live
/// before: weights and optimizer slots) and its time.
template <class Net>
step_figures measure(Net& net, const batch& b) {
  fx::memory::reset_peak();
  const auto before = fx::memory_stats().bytes_in_use;
  const auto start = std::chrono::steady_clock::now();
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(b.images, true), b.labels);
  auto grads = tape.gradient(loss, net.trainable_variables());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {static_cast<double>(fx::memory_stats().peak_bytes_in_use - before), seconds, std::move(grads)};
}

/// With fraction_bits > 0 both paths run the blocks' couplings on a fixed-point grid
/// (set_fixed_point), which makes the reconstruction exact.
template <int N>
void compare(const char* name, const batch& b, int fraction_bits = 0) {
  fx::random::generator gen{38};
  revnet<N> net;
  net.initialize(gen);
  revnet_model::set_fixed_point(net, fraction_bits);
  measure(net, b);  // warm the allocator's cache and the kernels' scratch
  set_reversible(net, false);
  measure(net, b);
  const auto plain = measure(net, b);
  set_reversible(net, true);
  const auto rev = measure(net, b);
  // The reference text's check is the largest absolute difference; a relative one is taken per
  // variable as |g_rev - g|_2 / |g|_2, over the variables whose gradient does not vanish (the conv
  // biases before a batch norm have an exact gradient of 0, and both paths return rounding noise).
  double max_abs = 0, worst = 0, largest = 0;
  std::string worst_name;
  for (const auto& g : plain.grads) largest = std::max(largest, static_cast<double>(fx::tensor<float>(fx::sqrt(fx::reduce_sum(fx::square(g)))).item()));
  const auto vars = net.trainable_variables();
  for (std::size_t i = 0; i < rev.grads.size(); ++i) {
    max_abs = std::max(max_abs, static_cast<double>(fx::tensor<float>(fx::reduce_max(fx::abs(rev.grads[i] - plain.grads[i]))).item()));
    const double norm = fx::tensor<float>(fx::sqrt(fx::reduce_sum(fx::square(plain.grads[i])))).item();
    if (norm < 1e-4 * largest) continue;
    const double rel = fx::tensor<float>(fx::sqrt(fx::reduce_sum(fx::square(rev.grads[i] - plain.grads[i])))).item() / norm;
    if (rel > worst) worst = rel, worst_name = vars[i]->name();
  }
  std::printf("%-18s %3zu variables: reversible vs ordinary gradients, max abs difference %.2e, worst relative %.2e (%s)\n",
              name, rev.grads.size(), max_abs, worst, worst_name.c_str());
  if (fraction_bits > 0)
    std::printf("%-18s fixed point, %d fraction bits: reconstruction %s (largest coupling output %.3g)\n", name,
                fraction_bits, revnet_model::reconstruction_exact(net) ? "exact" : "NOT exact: out of the grid's range",
                revnet_model::largest_magnitude(net));
  std::printf("%-18s activation memory: ordinary %7.1f MiB, reversible %6.1f MiB (%.2fx); step %.2f s vs %.2f s (%.2fx)\n",
              name, plain.activation_bytes / (1 << 20), rev.activation_bytes / (1 << 20),
              rev.activation_bytes / plain.activation_bytes, plain.seconds, rev.seconds, rev.seconds / plain.seconds);
}

int main(int argc, char** argv) {
  int steps = 20;
  fx::index_t batch_size = 16;
  std::string cifar_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--steps" && i + 1 < argc) steps = std::stoi(argv[++i]);
    else if (arg == "--batch" && i + 1 < argc) batch_size = std::stoll(argv[++i]);
    else if (arg == "--cifar" && i + 1 < argc) cifar_dir = argv[++i];
    else {
      std::cerr << "usage: revnet [--steps N] [--batch N] [--cifar DIR]\n";
      return 2;
    }
  }
  try {
    fx::random::generator data_gen{1};
    const batch b = cifar_dir.empty() ? synthetic(batch_size, data_gen) : cifar(cifar_dir, batch_size);
    std::printf("RevNet on %s, batch %lld\n", cifar_dir.empty() ? "synthetic 32x32x3 images" : "CIFAR-10",
                static_cast<long long>(batch_size));
    compare<3>("RevNet-38-like", b);
    compare<9>("RevNet-110-like", b);
    compare<9>("RevNet-110 exact", b, 16);  // the same network with exact reversal (16 fraction bits)

    // Training: Adam on the reversible RevNet-38-like model.
    fx::random::generator gen{7};
    revnet<3> net;
    net.initialize(gen);
    fx::optim::adam opt{1e-3};
    for (int s = 1; s <= steps; ++s) {
      fx::gradient_tape tape;
      fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(b.images, true), b.labels);
      auto vars = net.trainable_variables();
      opt.apply_gradients(tape.gradient(loss, vars), vars);
      if (s == 1 || s % 5 == 0 || s == steps) std::printf("step %3d: loss %.4f\n", s, loss.item());
    }
    return 0;
  } catch (const fx::error& e) {
    std::cerr << "revnet: " << e.what() << "\n";
    return 1;
  }
}
