// expect-error: fluxion::random::uniform<T>: T must be float, double, std::int32_t or std::int64_t
#include <fluxion/tensor/random.hpp>
int main() { fluxion::random::generator gen(1); auto t = fluxion::random::uniform<bool>(fluxion::shape{2}, gen); (void)t; }
