// expect-error: fluxion::checkpoint ckpt.* incomplete type|incomplete type .fluxion::checkpoint.
// fx::checkpoint used with only the umbrella header: g++ and clang say the type is incomplete (the umbrella
// declares it); clang adds a note at the declaration, whose comment names <fluxion/checkpoint.hpp>.
#include <fluxion/fluxion.hpp>
int main() {
  fluxion::variable<float> w{fluxion::tensor<float>{1.f}};
  fluxion::checkpoint ckpt{{"w", w}};
  ckpt.save("ckpt/model");
}
