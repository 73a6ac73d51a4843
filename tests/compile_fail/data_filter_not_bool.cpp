// expect-error: fluxion::data::dataset::filter: the predicate must return bool
// not-expected: error:.*error:|errors generated
#include <fluxion/data.hpp>
#include <fluxion/tensor.hpp>
#include <string>
int main() {
  auto ds = fluxion::data::tensors(fluxion::tensor<float>{1.f, 2.f});
  auto kept = ds.filter([](const fluxion::tensor<float>&) { return std::string("yes"); });
  (void)kept;
}
