// expect-error: fluxion::distributed: collectives take float, double, int32 or int64 tensors
#include <fluxion/distributed.hpp>
int main() {
  fluxion::distributed::communicator comm;
  fluxion::tensor<bool> t = true;
  auto s = comm.all_reduce(t);
  (void)s;
}
