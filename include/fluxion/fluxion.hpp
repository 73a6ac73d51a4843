// The umbrella header: everything fluxion offers on the CPU.
//
//   #include <fluxion/fluxion.hpp>
//   namespace fx = fluxion;
//   fx::tensor<float> x = {{2.f}};
//   std::cout << fx::matmul(x, x);   // tensor([[4.]], dtype=float32, shape=(1, 1))
//
// Optional parts sit behind their own headers: <fluxion/cuda.hpp> (the fx::cuda device through
// Thrust) and <fluxion/xtensor.hpp> (zero-copy xtensor views, costly to compile).
#pragma once

#include "tensor.hpp"
#include "tensor/creation.hpp"
#include "tensor/print.hpp"
#include "tensor/random.hpp"
#include "nn.hpp"
#include "optim.hpp"
#include "io.hpp"
#include "losses.hpp"
#include "metrics.hpp"
#include "fit.hpp"
#include "nn/prebuilt.hpp"
