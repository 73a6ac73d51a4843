// Process 1 leaves on an exception while process 0 waits at a barrier: the communicator, destroyed
// by the exception, calls MPI_Abort, so the job ends instead of waiting forever (ctest passes on
// the abort's message and fails on a hang by its timeout; cmake/tests.cmake).
#include <cstdio>
#include <stdexcept>

#include <fluxion/distributed.hpp>

int main(int argc, char** argv) {
  try {
    fluxion::distributed::communicator comm{argc, argv};
    if (comm.rank() == 1) throw std::runtime_error("process 1 failed");
    comm.barrier();
    std::puts("the barrier returned: process 1 did not abort the job");
  } catch (const std::exception& e) {
    std::printf("caught: %s\n", e.what());
  }
  return 0;
}
