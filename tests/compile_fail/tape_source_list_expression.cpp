// expect-error: (binary_expr.*a source must be a tensor or a variable; an expression .* is not evaluated|a source must be a tensor or a variable; an expression .* is not evaluated.*binary_expr)
// not-expected: candidate|error:.*error:|errors generated
// (g++ names Source before the message, clang after it.) An unevaluated expression among the sources
// in braces: one error from gradient_source, not a list of every gradient() overload.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
int main() {
  fx::variable<float> w(fx::ones<float>({3}));
  fx::gradient_tape tape;
  auto loss = fx::reduce_sum(w * w);
  auto g = tape.gradient(loss, {w, w * 2.f});
  (void)g;
}
