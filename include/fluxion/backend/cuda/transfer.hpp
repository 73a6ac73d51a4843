// fx::to<Device>(x) and fx::synchronize<Device>() moved to the device-generic core in stop 53
// (tensor/transfer.hpp, in <fluxion/tensor.hpp>); this header stays for code that includes it.
#pragma once

#include "../../tensor/transfer.hpp"
#include "memory.hpp"
