// expect-error: Device must be fluxion::cpu or fluxion::cuda
#include <fluxion/tensor.hpp>
struct tpu {};
int main() { fluxion::tensor<float, tpu> t; (void)t; }
