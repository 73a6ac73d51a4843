// fluxion's prebuilt I/O (include/fluxion/io/prebuilt.hpp): safetensors files, checkpoints and
// TensorBoard summaries, compiled once for programs built with FLUXION_PREBUILT_KERNELS instead of
// in every translation unit that saves, restores or logs. Built with the default autodiff
// settings, like nn_kernels.cpp; CMake's fluxion_target_prebuilt_kernels(app) builds it with app's
// flags. The kernels and model-layer statements it calls are kernels.cpp's and nn_kernels.cpp's
// (extern here).
#define FLUXION_PREBUILT_IO_SOURCE
#ifndef FLUXION_PREBUILT_KERNELS
#define FLUXION_PREBUILT_KERNELS
#endif
#include <fluxion/fluxion.hpp>
#include <fluxion/checkpoint.hpp>
#include <fluxion/tensorboard.hpp>
