// expect-error: fluxion::jvp: forward mode is compiled out; define FLUXION_FORWARD_MODE to 1
// not-expected: error:.*error:|errors generated
// fx::jvp without forward mode compiled in (core/config.hpp) names the macro that turns it on.
#include <fluxion/fluxion.hpp>

namespace fx = fluxion;

int main() {
  fx::tensor<double> x = {1.0, 2.0}, v = {1.0, 0.0};
  auto [y, t] = fx::jvp([](const auto& a) { return fx::sin(a); }, x, v);
  return 0;
}
