// expect-error: fluxion::nn::embedding: the indices are on another device than the table
// Indices on the cpu looked up in an embedding table on the GPU.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::embedding<10, 4, float, fluxion::cuda> table;
  fluxion::tensor<int> ids(fluxion::shape{2, 3});
  auto y = table(ids);
  (void)y;
}
