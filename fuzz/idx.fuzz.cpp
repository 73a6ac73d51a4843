// libFuzzer target: IDX files (plain or gzip) read through fx::data::idx and idx_images, every element.
#include <fluxion/data.hpp>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_input(data, size, ".idx");
  try {
    for (const auto& element : fluxion::data::idx<float>(path)) (void)element.size();
  } catch (const fluxion::error&) {
  }
  try {
    for (const auto& element : fluxion::data::idx_images(path).batch(3)) (void)element.size();
  } catch (const fluxion::error&) {
  }
  return 0;
}
