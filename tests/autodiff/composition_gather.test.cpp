// The composition matrix, outer kind "gather": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under gather: gradients and tangents against central differences") {
  composition::check_all<2>();
}
