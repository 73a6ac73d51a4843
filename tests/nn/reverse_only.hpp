// The gradient checks of the layer tests: the tape only (forward mode is checked by the ops' tests).
#pragma once

#include <fluxion/core/config.hpp>  // first: check_gradients.hpp would turn forward mode on
#include <fluxion/testing/check_gradients.hpp>

namespace test {

inline const fluxion::testing::check_options reverse_only{.reverse = true, .forward = false};

}  // namespace test
