// The composition matrix, outer kind "elementwise": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under elementwise: gradients and tangents against central differences") {
  composition::check_all<0>();
}
