// fluxion's prebuilt model-layer statements (include/fluxion/nn/prebuilt.hpp): the float
// statements of dense, conv2d, pooling and LSTM layers, sparse softmax cross-entropy and the
// optimizers' update, with their backward functions, for programs built with
// FLUXION_PREBUILT_KERNELS. Unlike kernels.cpp it records gradients, so it is built with the
// default autodiff settings (order 1, no forward mode); programs with other settings instantiate
// their own. CMake's fluxion_target_prebuilt_kernels(app) builds it with app's flags.
// The GEMM and convolution kernels it calls are kernels.cpp's (extern here).
#define FLUXION_PREBUILT_NN_SOURCE
#ifndef FLUXION_PREBUILT_KERNELS
#define FLUXION_PREBUILT_KERNELS
#endif
#include <fluxion/fluxion.hpp>
