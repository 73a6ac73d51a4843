// The composition matrix, outer kind "conv": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under conv: gradients and tangents against central differences") {
  composition::check_all<6>();
}
