// expect-error: fluxion::gradient_tape::gradient: a source of integer or bool elements has no gradient
#include <fluxion/tensor.hpp>
int main() {
  fluxion::tensor<int> k = {1, 2};
  fluxion::gradient_tape tape;
  tape.watch(k);
  fluxion::tensor<float> y = fluxion::reduce_sum(fluxion::cast<float>(k) * 2.f);
  auto g = tape.gradient(y, k);  // TensorFlow returns None; here it is a compile-time error
  (void)g;
}
