// The composition matrix, outer kind "concat": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under concat: gradients and tangents against central differences") {
  composition::check_all<3>();
}
