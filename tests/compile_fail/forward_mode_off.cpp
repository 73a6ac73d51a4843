// expect-error: fluxion::forward_accumulator: forward mode is compiled out; define FLUXION_FORWARD_MODE to 1
// Forward mode is opt-in (core/config.hpp): an accumulator in a program built without it would
// silently compute no tangents, so it does not compile, and says which macro turns it on.
#include <fluxion/fluxion.hpp>

namespace fx = fluxion;

int main() {
  fx::tensor<double> x = {1.0, 2.0}, v = {1.0, 0.0};
  fx::forward_accumulator acc(x, v);
  return 0;
}
