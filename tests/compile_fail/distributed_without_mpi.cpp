// expect-error: <fluxion/distributed.hpp> needs MPI \(Open MPI or MPICH, e.g. Debian's libopenmpi-dev\): link the CMake target fluxion::mpi
// A program that includes the data-parallel facade without MPI's headers on the include path (here:
// the include directories a fluxion::fluxion user gets) is told what to add, in one message, not
// "mpi.h: No such file or directory" followed by a screen of undeclared MPI names.
#include <fluxion/distributed.hpp>
int main() { return 0; }
