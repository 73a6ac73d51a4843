// expect-error: fluxion::unsorted_segment_max: data and segment_ids live on different devices
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; fluxion::tensor<std::int32_t, fluxion::cuda> i; auto r = fluxion::unsorted_segment_max(x, i, 1); (void)r; }
