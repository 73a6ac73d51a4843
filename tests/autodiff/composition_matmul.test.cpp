// The composition matrix, outer kind "matmul": see composition.hpp.
#include "composition.hpp"

TEST_CASE("every op under matmul: gradients and tangents against central differences") {
  composition::check_all<5>();
}
