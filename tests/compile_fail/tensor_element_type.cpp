// expect-error: T must be float, double, std::int32_t, std::int64_t or bool
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<char> t; (void)t; }
