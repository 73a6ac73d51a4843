#pragma once
// Zero-copy views to and from xtensor; kept out of <fluxion/fluxion.hpp> because xtensor is costly
// to compile. See tensor/xtensor.hpp.
#include "tensor/xtensor.hpp"
