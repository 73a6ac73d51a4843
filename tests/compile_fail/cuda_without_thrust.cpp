// expect-error: <fluxion/cuda.hpp> needs Thrust \(CCCL, shipped with the CUDA toolkit\) on the include path: link the CMake target fluxion::cuda
// A program that includes the device's facade without Thrust on the include path (here: the include
// directories a fluxion::fluxion user gets) is told what to add, not "thrust/execution_policy.h: No
// such file or directory".
#include <fluxion/cuda.hpp>
int main() { return 0; }
