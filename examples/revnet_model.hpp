// The RevNet of examples/revnet.cpp, shared with bench/revnet.bench.cpp: three stages of N
// reversible blocks on 32x32x32, 16x16x64 and 8x8x128 (NHWC), stride-2 convolutions between them.
// N = 3 is RevNet-38-like, N = 9 RevNet-110-like (36 and 108 convolutions in blocks).
#pragma once

#include <fluxion/fluxion.hpp>

#include <algorithm>

namespace revnet_model {

namespace fx = fluxion;
namespace nn = fluxion::nn;

/// F and G of a block on (H, H, C): half the channels in, half out.
template <fx::index_t H, fx::index_t C>
using residual = nn::sequential_t<nn::input<H, H, C / 2>, nn::batch_norm<>, nn::relu, nn::conv2d<C / 2, 3, nn::same>,
                                  nn::batch_norm<>, nn::relu, nn::conv2d<C / 2, 3, nn::same>>;
template <fx::index_t H, fx::index_t C, int N>
using stage = nn::reversible_sequence<residual<H, C>, residual<H, C>, N>;

template <int N>
using revnet = nn::sequential_t<nn::input<32, 32, 3>, nn::conv2d<32, 3, nn::same>,  //
                                stage<32, 32, N>,                                   //
                                nn::batch_norm<>, nn::relu, nn::conv2d<64, 3, nn::same, 2>,
                                stage<16, 64, N>,  //
                                nn::batch_norm<>, nn::relu, nn::conv2d<128, 3, nn::same, 2>,
                                stage<8, 128, N>,  //
                                nn::batch_norm<>, nn::relu, nn::avg_pool2d<8>, nn::flatten, nn::dense<10>>;

/// f applied to each of the three stages (layers 1, 5 and 9).
template <class Net, class F>
void for_each_stage(Net& net, F&& f) {
  f(net.template layer<1>());
  f(net.template layer<5>());
  f(net.template layer<9>());
}

template <class Net>
void set_reversible(Net& net, bool on) {
  for_each_stage(net, [on](auto& stage) { stage.set_reversible(on); });
}

/// Exact reversal (nn::reversible_sequence::set_fixed_point) in every stage: 0 turns it off.
template <class Net>
void set_fixed_point(Net& net, int fraction_bits) {
  for_each_stage(net, [fraction_bits](auto& stage) { stage.set_fixed_point(fraction_bits); });
}

/// Whether the last forward pass of every stage stayed on its grid's exact range, and the largest
/// coupling output of the three.
template <class Net>
bool reconstruction_exact(Net& net) {
  bool exact = true;
  for_each_stage(net, [&exact](auto& stage) { exact = exact && stage.reconstruction_exact(); });
  return exact;
}
template <class Net>
double largest_magnitude(Net& net) {
  double largest = 0;
  for_each_stage(net, [&largest](auto& stage) { largest = std::max(largest, stage.largest_magnitude()); });
  return largest;
}

}  // namespace revnet_model
