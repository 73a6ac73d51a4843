// fx::to and fx::synchronize without the device headers (tensor/transfer.hpp, in <fluxion/tensor.hpp>
// since stop 53): code generic over devices builds for the cpu alone. fx::to<fx::cpu> of a cpu
// tensor is that tensor (the same storage), of an expression its value, of a variable its value.
// Moving to fx::cuda without <fluxion/cuda.hpp> is compile_fail.to_cuda_without_cuda_header; the
// device copies are tests/backend/cuda/transfer.test.cpp.
#include "../test_util.hpp"

#include <vector>

namespace {
template <class Device>
fx::tensor<float, Device> doubled(const fx::tensor<float>& host) {
  return fx::to<Device>(host * 2.f);  // generic code, as a user's training loop is
}
}  // namespace

TEST_CASE("transfer: fx::to<fx::cpu> on the cpu needs no device header, and copies nothing") {
  const fx::tensor<float> x = {1.f, 2.f, 3.f};
  const fx::tensor<float> same = fx::to<fx::cpu>(x);
  CHECK(same.data() == x.data());
  CHECK(same.id() == x.id());
  const fx::tensor<float> y = fx::to<fx::cpu>(x * x + 1.f);
  CHECK(y.to_vector() == std::vector<float>{2.f, 5.f, 10.f});
  CHECK(doubled<fx::cpu>(x).to_vector() == std::vector<float>{2.f, 4.f, 6.f});
  fx::variable<float> v{x, "v"};
  CHECK(fx::to<fx::cpu>(v).to_vector() == x.to_vector());
  fx::synchronize<fx::cpu>();  // nothing to wait for on the cpu
}
