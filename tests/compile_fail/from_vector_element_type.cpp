// expect-error: fluxion::from_vector: the vector.s element type must be float, double, std::int32_t, std::int64_t or bool
#include <fluxion/tensor/creation.hpp>
#include <vector>
int main() { auto t = fluxion::from_vector(std::vector<char>{'a', 'b'}, fluxion::shape{2}); (void)t; }
