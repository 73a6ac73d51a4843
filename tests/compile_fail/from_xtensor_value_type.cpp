// expect-error: fluxion::from_xtensor: the expression.s value type must be float, double, std::int32_t, std::int64_t or bool
#include <fluxion/tensor/xtensor.hpp>
#include <xtensor/xarray.hpp>
int main() { xt::xarray<char> a = {'a', 'b'}; auto t = fluxion::from_xtensor(a); (void)t; }
