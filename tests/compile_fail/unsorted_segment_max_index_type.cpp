// expect-error: fluxion::unsorted_segment_max: segment_ids must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; fluxion::tensor<float> i = {0.f}; auto r = fluxion::unsorted_segment_max(x, i, 1); (void)r; }
