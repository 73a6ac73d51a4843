// libFuzzer target: TFRecord framing (both CRCs) and tf.train.Example decoding of every record.
#include <fluxion/data.hpp>
#include <fluxion/io/tfrecord.hpp>

#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_input(data, size, ".tfrecord");
  try {
    fluxion::io::tfrecord_reader reader{path};
    while (auto record = reader.next()) {
      try {
        (void)fluxion::data::parse_example(*record);
      } catch (const fluxion::error&) {
      }
    }
  } catch (const fluxion::error&) {
  }
  // The Example decoder on the raw bytes too, without framing.
  try {
    (void)fluxion::data::parse_example(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const fluxion::error&) {
  }
  return 0;
}
