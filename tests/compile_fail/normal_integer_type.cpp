// expect-error: fluxion::random::normal<T>: T must be float or double
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor/random.hpp>
#include <cstdint>
int main() { fluxion::random::generator gen(1); auto t = fluxion::random::normal<std::int32_t>(fluxion::shape{2}, gen); (void)t; }
