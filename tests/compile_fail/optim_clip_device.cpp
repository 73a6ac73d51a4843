// expect-error: fluxion::optim::clip_by_global_norm: runs on the cpu device only
#include <fluxion/tensor.hpp>
#include <fluxion/optim/clip.hpp>
int main() { std::vector<fluxion::tensor<float, fluxion::cuda>> g; auto r = fluxion::optim::clip_by_global_norm(g, 1.0); (void)r; }
