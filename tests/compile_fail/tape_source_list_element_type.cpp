// expect-error: (tensor<double.*every source in braces must have the target's element type and device|every source in braces must have the target's element type and device.*tensor<double)
// not-expected: candidate|error:.*error:|errors generated
// (g++ names Source before the message, clang after it.) A double tensor among a float loss's sources
// in braces: one error from gradient_source, not a list of every gradient() overload.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
int main() {
  fx::variable<float> w(fx::ones<float>({3}));
  fx::tensor<double> x = {1.0, 2.0, 3.0};
  fx::gradient_tape tape;
  auto loss = fx::reduce_sum(w * w);
  auto g = tape.gradient(loss, {w, x});
  (void)g;
}
