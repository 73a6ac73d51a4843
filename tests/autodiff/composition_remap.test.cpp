// The composition matrix, outer kind "remap": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under remap: gradients and tangents against central differences") {
  composition::check_all<7>();
}
