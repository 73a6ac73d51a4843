// expect-error: fluxion::arange: the element type must be float, double, std::int32_t or std::int64_t
#include <fluxion/tensor/creation.hpp>
int main() { auto t = fluxion::arange<bool>(0, 5); (void)t; }
