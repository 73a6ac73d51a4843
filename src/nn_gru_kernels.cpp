// fluxion's prebuilt nn::gru statements and fused cells (float, the last state and the whole
// sequence; include/fluxion/nn/prebuilt.hpp), for programs built with FLUXION_PREBUILT_KERNELS and
// FLUXION_PREBUILT_GRU. In the library by default since stop 53 (fluxion_target_prebuilt_kernels(app
// NO_GRU) leaves it out: 14 CPU s that a program without a GRU need not pay). Like nn_kernels.cpp it
// records gradients, so it is built with the default autodiff settings.
#define FLUXION_PREBUILT_NN_GRU_SOURCE
#ifndef FLUXION_PREBUILT_KERNELS
#define FLUXION_PREBUILT_KERNELS
#endif
#include <fluxion/fluxion.hpp>
