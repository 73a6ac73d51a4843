// An installed fluxion's <fluxion/distributed.hpp> through the CMake target fluxion::mpi: built by
// the consumer test (not run: it would need mpirun; tests/distributed runs the collectives).
#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>

#include <iostream>

int main(int argc, char** argv) {
  fluxion::distributed::communicator comm{argc, argv};
  const fluxion::tensor<float> mine = {static_cast<float>(comm.rank())};
  std::cout << "process " << comm.rank() << " of " << comm.size() << ": " << comm.all_reduce(mine) << "\n";
  return 0;
}
