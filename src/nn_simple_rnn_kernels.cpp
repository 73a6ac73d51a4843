// fluxion's prebuilt nn::simple_rnn statements and fused cell (float, the last state and the whole
// sequence, with and without states and masks; include/fluxion/nn/prebuilt.hpp), for programs
// built with FLUXION_PREBUILT_KERNELS and FLUXION_PREBUILT_SIMPLE_RNN: in the library only on
// request (fluxion_target_prebuilt_kernels(app SIMPLE_RNN), stop 84). Like nn_kernels.cpp it
// records gradients, so it is built with the default autodiff settings.
#define FLUXION_PREBUILT_NN_SIMPLE_RNN_SOURCE
#ifndef FLUXION_PREBUILT_KERNELS
#define FLUXION_PREBUILT_KERNELS
#endif
#include <fluxion/fluxion.hpp>
