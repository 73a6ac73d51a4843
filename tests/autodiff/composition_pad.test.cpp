// The composition matrix, outer kind "pad": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under pad: gradients and tangents against central differences") {
  composition::check_all<4>();
}
