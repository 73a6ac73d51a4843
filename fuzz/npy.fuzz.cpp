// libFuzzer target: fx::io::load_npy on arbitrary bytes, for each element type it reads.
#include <fluxion/io/npy.hpp>
#include <fluxion/tensor.hpp>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_input(data, size, ".npy");
  auto attempt = [&](auto tag) {
    using T = decltype(tag);
    try {
      const auto t = fluxion::io::load_npy<T>(path);
      (void)t.size();
    } catch (const fluxion::error&) {
    }
  };
  attempt(float{});
  attempt(double{});
  attempt(std::int32_t{});
  attempt(std::int64_t{});
  attempt(bool{});
  return 0;
}
