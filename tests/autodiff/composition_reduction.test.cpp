// The composition matrix, outer kind "reduction": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under reduction: gradients and tangents against central differences") {
  composition::check_all<1>();
}
