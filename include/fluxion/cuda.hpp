// Facade: the fx::cuda device. Include it (instead of, or next to, <fluxion/tensor.hpp>) to create
// tensors on the GPU, evaluate expressions there through Thrust, and move tensors between devices.
//
//   #include <fluxion/cuda.hpp>
//   fx::tensor<float, fx::cuda> g = fx::to<fx::cuda>(x);   // copy to the device
//   fx::tensor<float, fx::cuda> y = fx::sin(g) * g + 1.f;  // one fused kernel on the device
//   auto total = fx::reduce_sum(y).item();                 // reduced on the device, read back
//   std::cout << y;                                        // copied back: tensor([...], ..., device=cuda)
//   fx::tensor<float, fx::cuda> p = fx::matmul(g, g2);     // cuBLAS; fx::allow_tf32(true) opts in to TF32
//   { fx::own_stream mine; /* ... */ }                     // this thread's work beside other threads'
//
// Compile with nvcc (-x cu) to run on a CUDA GPU, or with a host compiler, -fopenmp and
// -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP to run the same code on the CPU's cores; either
// way Thrust's headers (CCCL, shipped with the CUDA toolkit) must be on the include path. The CMake
// target fluxion::cuda provides them.
#pragma once

// Without Thrust on the include path the first of its headers fails with "No such file or
// directory", naming neither fluxion nor what to do about it (stop 53's newcomer program).
#if defined(__has_include) && !__has_include(<thrust/execution_policy.h>)
#error "<fluxion/cuda.hpp> needs Thrust (CCCL, shipped with the CUDA toolkit) on the include path: link the CMake target fluxion::cuda and compile with nvcc to run on a GPU; or, to run fx::cuda code on the CPU's cores, add the toolkit's include/cccl directory (/usr/local/cuda/include/cccl) with -fopenmp -DTHRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP"
#else  // the rest of the header only where Thrust is, so that the message above is the only one

#include "backend/cuda/evaluator.hpp"
#include "backend/cuda/recurrent.hpp"
#include "backend/cuda/sort.hpp"
#include "backend/cuda/memory.hpp"
#include "backend/cuda/window.hpp"
#include "tensor.hpp"
#include "tensor/print.hpp"  // printing a device tensor copies it back

#endif
