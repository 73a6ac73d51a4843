// fluxion's prebuilt dense and conv2d statements with Keras's other activations fused in (elu,
// selu, leaky_relu, relu6, silu, softplus, softsign, mish; include/fluxion/nn/prebuilt.hpp), for
// programs built with FLUXION_PREBUILT_KERNELS and FLUXION_PREBUILT_ACTIVATIONS. Optional
// (fluxion_target_prebuilt_kernels(app ACTIVATIONS)): it adds a quarter to the library's build.
// Like nn_kernels.cpp it records gradients, so it is built with the default autodiff settings.
#define FLUXION_PREBUILT_NN_ACTIVATION_SOURCE
#ifndef FLUXION_PREBUILT_KERNELS
#define FLUXION_PREBUILT_KERNELS
#endif
#include <fluxion/fluxion.hpp>
