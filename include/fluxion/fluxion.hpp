// The umbrella header: everything fluxion offers on the CPU.
//
//   #include <fluxion/fluxion.hpp>
//   namespace fx = fluxion;
//   fx::tensor<float> x = {{2.f}};
//   std::cout << fx::matmul(x, x);   // tensor([[4.]], dtype=float32, shape=(1, 1))
//
// Optional parts sit behind their own headers, so that a program compiles only what it uses:
//   <fluxion/data.hpp>         datasets and their readers (IDX, CSV, npy, TFRecord), Fashion-MNIST
//   <fluxion/checkpoint.hpp>   fx::checkpoint, checkpoint_manager, checkpoint_callback (safetensors)
//   <fluxion/tensorboard.hpp>  fx::summary_writer, tensorboard_callback
//   <fluxion/io.hpp>           .npy, safetensors, checkpoints and summaries (fx::io)
//   <fluxion/cuda.hpp>         the fx::cuda device through Thrust
//   <fluxion/xtensor.hpp>      zero-copy xtensor views, costly to compile
#pragma once

#include "tensor.hpp"
#include "tensor/creation.hpp"
#include "tensor/print.hpp"
#include "tensor/random.hpp"
#include "nn.hpp"
#include "optim.hpp"
#include "losses.hpp"
#include "metrics.hpp"
#include "fit.hpp"
#include "nn/prebuilt.hpp"

namespace fluxion {
// Declared, not defined, here: a program that uses one without its header gets "incomplete type"
// with a note that points at the line below, which names the header to include.
class checkpoint;            // defined in <fluxion/checkpoint.hpp>: #include it to save or restore
class checkpoint_manager;    // defined in <fluxion/checkpoint.hpp>: #include it to save or restore
class checkpoint_callback;   // defined in <fluxion/checkpoint.hpp>: #include it to save from fx::fit
class tensorboard_callback;  // defined in <fluxion/tensorboard.hpp>: #include it to log from fx::fit
namespace io {
class summary_writer;        // defined in <fluxion/tensorboard.hpp> (or <fluxion/io.hpp>): #include it
}  // namespace io
using io::summary_writer;
}  // namespace fluxion
