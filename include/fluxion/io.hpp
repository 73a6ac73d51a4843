// Facade: reading and writing tensors in files.
//
//   #include <fluxion/io.hpp>
//   auto x = fx::io::load_npy<float>("x.npy");   // NumPy's .npy, versions 1.0 to 3.0
//   fx::io::save_npy("y.npy", fx::exp(x));       // written atomically (a temporary file, renamed)
//
// Every failure throws fluxion::io_error, naming the function, the file and what is wrong.
#pragma once

#include "io/checkpoint.hpp"
#include "io/npy.hpp"
#include "io/safetensors.hpp"
#include "io/summary.hpp"
