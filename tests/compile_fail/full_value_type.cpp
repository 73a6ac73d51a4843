// expect-error: fluxion::full: the value.s type must be float, double, std::int32_t, std::int64_t or bool
#include <fluxion/tensor/creation.hpp>
int main() { auto t = fluxion::full(fluxion::shape{2}, 'a'); (void)t; }
