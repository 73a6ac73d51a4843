// expect-error: fluxion::nn::rescaling: the input must be float or double
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() {
  fluxion::nn::rescaling scale{1.0 / 255};
  auto y = scale(fluxion::zeros<std::int32_t>({2, 4}));
  (void)y;
}
