// Data-parallel training over MPI: fx::distributed::communicator (the job's processes, all-reduce
// and broadcast on tensors and variables) and fx::distributed::data_parallel (an optimizer wrapper
// that averages every process's gradients, and under fx::fit starts every process from the same
// variables and combines the epoch's logs). Not in the umbrella header: it needs <mpi.h>, so a
// program links the CMake target fluxion::mpi (MPI::MPI_C) and runs under mpirun.
//
//   #include <fluxion/fluxion.hpp>
//   #include <fluxion/distributed.hpp>
//   int main(int argc, char** argv) {
//     fx::distributed::communicator comm{argc, argv};
//     fx::optim::adam adam{{.learning_rate = 1e-3f}};
//     fx::distributed::data_parallel opt{comm, adam};
//     auto batches = train.shard(comm.size(), comm.rank()).shuffle(10000, 42).batch(64, true);
//     fx::fit(net, opt, loss, batches, {.epochs = 5, .verbose = comm.rank() == 0 ? 1 : 0});
//   }
//
//   mpirun -np 4 ./train
#pragma once

#include "distributed/communicator.hpp"
#include "distributed/data_parallel.hpp"
