// expect-error: fluxion::distributed: collectives take fluxion::cpu tensors and variables
#include <fluxion/distributed.hpp>
int main() {
  fluxion::distributed::communicator comm;
  fluxion::tensor<float, fluxion::cuda> t;
  auto s = comm.all_reduce(t);
  (void)s;
}
