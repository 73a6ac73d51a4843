// Checks the toolchain the device-generic tests rely on: Thrust from CCCL compiles with this
// compiler and C++20, and its device system (OpenMP under g++, CUDA under nvcc) computes real
// results. If this test fails, every other backend/cuda test is suspect.
#include <doctest/doctest.h>

#include <thrust/device_vector.h>
#include <thrust/functional.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>
#include <thrust/transform.h>

#include <cstdint>

#include "fluxion/core/config.hpp"

namespace {

struct affine {
  std::int64_t scale, shift;
  FLUXION_HOST_DEVICE std::int64_t operator()(std::int64_t x) const { return scale * x + shift; }
};

}  // namespace

TEST_CASE("thrust: reduce of a sequence equals n(n-1)/2") {
  for (std::int64_t n : {1, 2, 1000, 100003}) {
    thrust::device_vector<std::int64_t> v(static_cast<std::size_t>(n));
    thrust::sequence(v.begin(), v.end());
    CHECK(thrust::reduce(v.begin(), v.end(), std::int64_t{0}) == n * (n - 1) / 2);
  }
}

TEST_CASE("thrust: transform with a host-device functor, then reduce") {
  const std::int64_t n = 4097;
  thrust::device_vector<std::int64_t> v(static_cast<std::size_t>(n));
  thrust::sequence(v.begin(), v.end());
  thrust::device_vector<std::int64_t> w(v.size());
  thrust::transform(v.begin(), v.end(), w.begin(), affine{3, -1});
  CHECK(w[0] == -1);
  CHECK(w[static_cast<std::size_t>(n - 1)] == 3 * (n - 1) - 1);
  CHECK(thrust::reduce(w.begin(), w.end(), std::int64_t{0}, thrust::plus<std::int64_t>{}) ==
        3 * n * (n - 1) / 2 - n);
}

TEST_CASE("thrust: the device system is the one the build asked for") {
#if FLUXION_CUDA_COMPILER
  CHECK(THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA);
#else
  CHECK(THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_OMP);
#endif
}
