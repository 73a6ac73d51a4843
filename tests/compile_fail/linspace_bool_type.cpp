// expect-error: fluxion::linspace: the element type must be float, double, std::int32_t or std::int64_t
#include <fluxion/tensor/creation.hpp>
int main() { auto t = fluxion::linspace<bool>(0, 1, 5); (void)t; }
