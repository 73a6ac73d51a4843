// expect-error: fluxion::unsorted_segment_sum: segment_ids must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; auto r = fluxion::unsorted_segment_sum(x, fluxion::tensor<float>{0.f}, 1); (void)r; }
