// Eager tensors, from "TensorFlow Research at Scale": results at once, instant errors, and
// ordinary C++ control flow on tensor values.
#include <fluxion/fluxion.hpp>

#include <iostream>

namespace fx = fluxion;

int main() {
  // A matmul of [[2.]] with itself, printed.
  fx::tensor<float> x = {{2.f}};
  auto m = fx::matmul(x, x);
  std::cout << m << "\n";  // tensor([[4.]], dtype=float32, shape=(1, 1))

  // A failing gather: the error names the op and the values.
  try {
    fx::gather(fx::tensor<int>{0, 1, 2}, 7);
  } catch (const fx::invalid_argument& e) {
    std::cout << "caught: " << e.what() << "\n";  // gather: indices = 7 is not in [0, 3)
  }

  // The Collatz sequence from 6, with C++ `while` and `if` deciding on tensor values.
  fx::tensor<int> a = 6;
  std::cout << a << "\n";
  while (!fx::all(a == 1)) {
    if (fx::all(a % 2 == 0))
      a = a / 2;
    else
      a = 3 * a + 1;
    std::cout << a << "\n";
  }
  return 0;
}
