// expect-error: fluxion::linear_recurrence: the initial state's element type or device is not b's; cast or move it
#include <fluxion/tensor.hpp>
int main() {
  fluxion::tensor<float> b = {{1.f, 2.f}};
  fluxion::tensor<double> h0 = {0.5};
  auto h = fluxion::linear_recurrence(0.5f, b, h0, 1);
  auto g = fluxion::linear_recurrence(b, b, h0, 1);
  (void)h;
  (void)g;
}
