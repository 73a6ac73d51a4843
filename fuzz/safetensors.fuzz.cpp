// libFuzzer target: the safetensors reader (header JSON, offsets, dtypes) and decoding every tensor.
#include <fluxion/io/safetensors.hpp>

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = fluxion::io::safetensors::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    for (const auto& name : file.names()) {
      try {
        (void)file.get<float>(name);
      } catch (const fluxion::error&) {
      }
    }
  } catch (const fluxion::error&) {
  }
  return 0;
}
