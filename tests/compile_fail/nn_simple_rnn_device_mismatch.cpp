// expect-error: fluxion::nn::simple_rnn: the input is on another device than the layer's variables
// A cpu batch fed to a SimpleRNN whose variables live on the GPU.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::simple_rnn<4, false, float, fluxion::cuda> rnn;
  fluxion::tensor<float> x(fluxion::shape{2, 3, 5});
  auto y = rnn(x);
  (void)y;
}
