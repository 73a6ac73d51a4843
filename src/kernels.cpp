// fluxion's prebuilt CPU kernels (include/fluxion/backend/cpu/prebuilt.hpp): the one translation
// unit that compiles the GEMM, convolution and pooling kernels of float and double, and the
// statements and random draws that every program runs (copies, fills, sums), for programs
// built with FLUXION_PREBUILT_KERNELS. It also holds the one definition of the core's non-template
// code (the thread pool, the host allocator's cache, shape checks and their messages;
// include/fluxion/core/prebuilt.hpp), which such programs see declared only. CMake's
// fluxion_target_prebuilt_kernels(app) builds it in the consumer's own build, with app's flags.
// The kernels do not depend on autodiff, so it is left out here.
#define FLUXION_PREBUILT_KERNELS_SOURCE
#define FLUXION_MAX_DERIVATIVE_ORDER 0
#include <fluxion/tensor.hpp>
#include <fluxion/tensor/random.hpp>
