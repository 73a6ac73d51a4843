// fx::summary_writer: the event file decoded here by an independent reader (the TFRecord framing
// with both CRC-32C checked bit by bit, the protocol buffer fields, the PNG chunks with their CRC-32
// and the stored deflate blocks), the flush policy, every error, and the same files read back by
// TensorBoard's own EventAccumulator (tests/io/read_events.py, when Python has `tensorboard`).
#include <doctest/doctest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <csignal>
#include <sys/resource.h>
#include <unistd.h>

#include <fluxion/io.hpp>
#include <fluxion/tensor.hpp>
#include <fluxion/tensor/creation.hpp>

#include "../test_util.hpp"
#include "../scratch_dir.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace io_summary_test {

namespace {


std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---- independent references: bit-at-a-time CRCs, as the specifications state them ----

std::uint32_t crc_bitwise(std::string_view bytes, std::uint32_t reflected_polynomial) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ reflected_polynomial : c >> 1;
  }
  return ~c;
}
std::uint32_t masked_crc32c_reference(std::string_view bytes) {
  const std::uint32_t crc = crc_bitwise(bytes, 0x82F63B78u);  // CRC-32C (Castagnoli)
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::uint64_t little_endian(std::string_view bytes) {
  std::uint64_t v = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}
std::uint32_t big_endian32(std::string_view bytes) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

/// The records of a TFRecord file; both CRCs of every record are checked.
std::vector<std::string> read_records(const std::string& path) {
  const std::string file = read_bytes(path);
  std::vector<std::string> records;
  std::size_t pos = 0;
  while (pos < file.size()) {
    REQUIRE(file.size() - pos >= 12);
    const std::string_view length_bytes(file.data() + pos, 8);
    CHECK(little_endian(std::string_view(file.data() + pos + 8, 4)) == masked_crc32c_reference(length_bytes));
    const std::uint64_t length = little_endian(length_bytes);
    REQUIRE(file.size() - pos - 12 >= length + 4);
    const std::string data = file.substr(pos + 12, length);
    CHECK(little_endian(std::string_view(file.data() + pos + 12 + length, 4)) == masked_crc32c_reference(data));
    records.push_back(data);
    pos += 16 + length;
  }
  return records;
}

// ---- a protocol buffer decoder for the wire types an Event uses ----

struct field {
  std::uint32_t number = 0;
  int wire = 0;
  std::uint64_t value = 0;  // varint, fixed64 and fixed32 bits
  std::string bytes;        // length-delimited
};

std::uint64_t read_varint(std::string_view data, std::size_t& pos) {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    REQUIRE(pos < data.size());
    REQUIRE(shift < 64);
    const auto b = static_cast<unsigned char>(data[pos++]);
    v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
}

std::vector<field> decode(std::string_view data) {
  std::vector<field> fields;
  std::size_t pos = 0;
  while (pos < data.size()) {
    const std::uint64_t key = read_varint(data, pos);
    field f;
    f.number = static_cast<std::uint32_t>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (f.wire == 0) {
      f.value = read_varint(data, pos);
    } else if (f.wire == 1 || f.wire == 5) {
      const std::size_t n = f.wire == 1 ? 8 : 4;
      REQUIRE(data.size() - pos >= n);
      f.value = little_endian(data.substr(pos, n));
      pos += n;
    } else {
      REQUIRE(f.wire == 2);
      const std::uint64_t n = read_varint(data, pos);
      REQUIRE(data.size() - pos >= n);
      f.bytes = std::string(data.substr(pos, n));
      pos += n;
    }
    fields.push_back(f);
  }
  return fields;
}

/// The one field with this number and wire type; fails the test unless there is exactly one.
field only(const std::vector<field>& fields, std::uint32_t number, int wire) {
  std::vector<field> found;
  for (const auto& f : fields)
    if (f.number == number) found.push_back(f);
  REQUIRE_MESSAGE(found.size() == 1, "field " << number << " appears " << found.size() << " times");
  REQUIRE(found[0].wire == wire);
  return found[0];
}
bool has(const std::vector<field>& fields, std::uint32_t number) {
  for (const auto& f : fields)
    if (f.number == number) return true;
  return false;
}
double as_double(const field& f) { return std::bit_cast<double>(f.value); }
float as_float(const field& f) { return std::bit_cast<float>(static_cast<std::uint32_t>(f.value)); }
std::vector<double> packed_doubles(const field& f) {
  REQUIRE(f.bytes.size() % 8 == 0);
  std::vector<double> v;
  for (std::size_t i = 0; i < f.bytes.size(); i += 8) v.push_back(std::bit_cast<double>(little_endian(f.bytes.substr(i, 8))));
  return v;
}

/// One summary event, decoded: its step, and the fields of its single Summary.Value.
struct summary_event {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string tag;
  std::vector<field> value;
};

summary_event decode_summary_event(const std::string& record) {
  const auto event = decode(record);
  summary_event e;
  e.wall_time = as_double(only(event, 1, 1));
  e.step = static_cast<std::int64_t>(only(event, 2, 0).value);
  CHECK_FALSE(has(event, 3));
  const auto summary = decode(only(event, 5, 2).bytes);
  e.value = decode(only(summary, 1, 2).bytes);
  e.tag = only(e.value, 1, 2).bytes;
  return e;
}

/// The single event file in a directory, after checking its name.
std::string event_file(const std::filesystem::path& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path().string());
  REQUIRE(files.size() == 1);
  return files[0];
}

/// Checks the file_version event and returns the summary events after it.
std::vector<summary_event> read_events(const std::string& path) {
  const auto records = read_records(path);
  REQUIRE(!records.empty());
  const auto first = decode(records[0]);
  CHECK(only(first, 3, 2).bytes == "brain.Event:2");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const double wall_time = as_double(only(first, 1, 1));
  CHECK(wall_time > now - 600);
  CHECK(wall_time <= now);
  CHECK_FALSE(has(first, 5));
  std::vector<summary_event> events;
  for (std::size_t i = 1; i < records.size(); ++i) {
    events.push_back(decode_summary_event(records[i]));
    CHECK(events.back().wall_time >= wall_time);
  }
  return events;
}

// ---- a PNG decoder for what summary_writer writes: 8-bit, no interlace, stored deflate blocks ----

struct decoded_png {
  std::uint32_t width = 0, height = 0;
  int color_type = -1;
  std::vector<unsigned char> pixels;
};

decoded_png decode_png(const std::string& png) {
  REQUIRE(png.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  decoded_png out;
  std::string idat;
  std::vector<std::string> chunk_types;
  std::size_t pos = 8;
  while (pos < png.size()) {
    REQUIRE(png.size() - pos >= 12);
    const std::uint32_t length = big_endian32(png.substr(pos, 4));
    REQUIRE(png.size() - pos - 12 >= length);
    const std::string typed = png.substr(pos + 4, 4 + length);
    CHECK(big_endian32(png.substr(pos + 8 + length, 4)) == crc_bitwise(typed, 0xEDB88320u));  // CRC-32
    const std::string type = typed.substr(0, 4), data = typed.substr(4);
    chunk_types.push_back(type);
    if (type == "IHDR") {
      REQUIRE(data.size() == 13);
      out.width = big_endian32(data.substr(0, 4));
      out.height = big_endian32(data.substr(4, 4));
      CHECK(data[8] == 8);  // bit depth
      out.color_type = data[9];
      CHECK(data.substr(10) == std::string(3, '\0'));
    } else if (type == "IDAT") {
      idat += data;
    }
    pos += 12 + length;
  }
  CHECK(chunk_types.front() == "IHDR");
  CHECK(chunk_types.back() == "IEND");

  // zlib: CMF, FLG, stored blocks, Adler-32 of the inflated bytes.
  REQUIRE(idat.size() >= 6);
  CHECK((static_cast<unsigned char>(idat[0]) & 0x0F) == 8);  // deflate
  CHECK(((static_cast<unsigned char>(idat[0]) << 8) | static_cast<unsigned char>(idat[1])) % 31 == 0);
  std::string inflated;
  std::size_t p = 2;
  for (bool final = false; !final;) {
    REQUIRE(idat.size() - p >= 5);
    const auto header = static_cast<unsigned char>(idat[p]);
    final = header & 1;
    REQUIRE_MESSAGE(((header >> 1) & 3) == 0, "only stored blocks are expected");
    const auto len = static_cast<std::size_t>(little_endian(idat.substr(p + 1, 2)));
    const auto nlen = static_cast<std::size_t>(little_endian(idat.substr(p + 3, 2)));
    CHECK(len == (~nlen & 0xFFFF));
    REQUIRE(idat.size() - p - 5 >= len);
    inflated += idat.substr(p + 5, len);
    p += 5 + len;
  }
  REQUIRE(idat.size() - p == 4);
  std::uint32_t a = 1, b = 0;  // Adler-32 as RFC 1950 defines it
  for (unsigned char c : inflated) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  CHECK(big_endian32(idat.substr(p)) == ((b << 16) | a));

  const int channels = out.color_type == 0 ? 1 : out.color_type == 2 ? 3 : out.color_type == 6 ? 4 : 0;
  REQUIRE(channels != 0);
  const std::size_t row = static_cast<std::size_t>(out.width) * static_cast<std::size_t>(channels);
  REQUIRE(inflated.size() == out.height * (row + 1));
  for (std::uint32_t y = 0; y < out.height; ++y) {
    CHECK(inflated[y * (row + 1)] == 0);  // filter None
    for (std::size_t i = 0; i < row; ++i) out.pixels.push_back(static_cast<unsigned char>(inflated[y * (row + 1) + 1 + i]));
  }
  return out;
}

/// read_events.py's output: each line a flat JSON object, its values read as text.
std::vector<std::map<std::string, std::string>> read_lines(const std::string& path) {
  std::vector<std::map<std::string, std::string>> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::map<std::string, std::string> object;
    std::size_t pos = 1;
    while (pos < line.size() && line[pos] != '}') {
      const std::size_t key_start = line.find('"', pos) + 1, key_end = line.find('"', key_start);
      std::size_t value_start = line.find(':', key_end) + 2, value_end;
      if (line[value_start] == '[') value_end = line.find(']', value_start) + 1;
      else if (line[value_start] == '"') value_end = line.find('"', value_start + 1) + 1;
      else value_end = line.find_first_of(",}", value_start);
      object[line.substr(key_start, key_end - key_start)] = line.substr(value_start, value_end - value_start);
      pos = value_end + (line[value_end] == ',' ? 2 : 0);
      if (line[value_end] == '}') break;
    }
    lines.push_back(object);
  }
  return lines;
}

/// What summary_writer::image must store for a floating-point pixel.
unsigned char expected_byte(double v) { return static_cast<unsigned char>(std::lround(std::clamp(v, 0.0, 1.0) * 255)); }

/// The histogram counts by TensorBoard's rule: bucket i holds (limits[i-1], limits[i]], bucket 0
/// everything at or below limits[0].
std::vector<double> naive_counts(const std::vector<double>& values, const std::vector<double>& limits) {
  std::vector<double> counts(limits.size(), 0);
  for (double v : values)
    for (std::size_t i = 0; i < limits.size(); ++i)
      if (v <= limits[i] || i + 1 == limits.size()) {
        counts[i] += 1;
        break;
      }
  return counts;
}

}  // namespace

TEST_CASE("summary_writer: the event file's name, file_version event and scalar events") {
  scratch_dir dir;
  const auto log_dir = dir.path / "runs" / "cnn";  // created, parents included
  // The writer names its file from std::chrono::system_clock. std::time reads the kernel's clock
  // as of its last tick, up to a tick behind, so it could name the second before and fail the
  // checks below at a second's boundary (seen once under load): use the writer's clock.
  const auto system_seconds = [] {
    return static_cast<std::int64_t>(
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
  };
  const auto before = system_seconds();
  std::string path;
  {
    fx::summary_writer log{log_dir.string()};
    path = log.path();
    fx::tensor<float> loss = {{0.5f}};
    fx::tensor<float> batch = {1.f, 2.f, 3.f, 6.f};
    fx::variable<double> v{fx::tensor<double>(0.125)};
    log.scalar("loss", loss, 0);
    log.scalar("loss", 0.25f, 1);
    log.scalar("lr", 1e-3, -7);                         // a double, a negative step
    log.scalar("mean", fx::reduce_mean(batch), 1LL << 40);  // an expression, a large step
    log.scalar("var", v, 2);
    CHECK(log.events() == 5);
  }
  const auto name = std::filesystem::path(path).filename().string();
  CHECK(std::filesystem::path(path).parent_path() == log_dir);
  CHECK(event_file(log_dir) == path);
  const std::string prefix = "events.out.tfevents.";
  REQUIRE(name.rfind(prefix, 0) == 0);
  const std::string rest = name.substr(prefix.size());
  const auto seconds = std::stoll(rest.substr(0, rest.find('.')));
  CHECK(seconds >= before);
  CHECK(seconds <= system_seconds());
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(rest.substr(rest.find('.') + 1) == host);

  const auto events = read_events(path);
  REQUIRE(events.size() == 5);
  const std::vector<std::pair<std::string, std::int64_t>> tags_steps = {
      {"loss", 0}, {"loss", 1}, {"lr", -7}, {"mean", std::int64_t{1} << 40}, {"var", 2}};
  const std::vector<float> values = {0.5f, 0.25f, 1e-3f, 3.f, 0.125f};
  for (std::size_t i = 0; i < events.size(); ++i) {
    CAPTURE(i);
    CHECK(events[i].tag == tags_steps[i].first);
    CHECK(events[i].step == tags_steps[i].second);
    CHECK(as_float(only(events[i].value, 2, 5)) == values[i]);
  }
  // The framing is also what fx::io::tfrecord_reader accepts.
  fx::io::tfrecord_reader reader{path};
  int n = 0;
  while (reader.next()) ++n;
  CHECK(n == 6);
}

TEST_CASE("summary_writer: histograms") {
  scratch_dir dir;
  const std::vector<float> values = {-1.f, 0.f, 0.25f, 0.5f, 0.5f, 2.f, 1.f, -0.75f, 1.5f, 0.f};
  const auto t = fx::from_vector(values, {2, 5});
  {
    fx::summary_writer log{dir.path.string()};
    log.histogram("w", t, 3, 4);
    log.histogram("w", t * 2.f, 4);                        // an expression, 30 buckets
    log.histogram("constant", fx::tensor<int>{7, 7, 7}, 5);
    log.histogram("empty", fx::from_vector(std::vector<float>{}, {0}), 6);
  }
  const auto events = read_events(event_file(dir.path));
  REQUIRE(events.size() == 4);
  for (std::size_t k = 0; k < 2; ++k) {
    CAPTURE(k);
    const double scale = k == 0 ? 1 : 2;
    const int buckets = k == 0 ? 4 : 30;
    std::vector<double> v;
    for (float x : values) v.push_back(x * scale);
    CHECK(events[k].tag == "w");
    CHECK(events[k].step == 3 + static_cast<std::int64_t>(k));
    const auto h = decode(only(events[k].value, 5, 2).bytes);
    CHECK(as_double(only(h, 1, 1)) == -1.0 * scale);
    CHECK(as_double(only(h, 2, 1)) == 2.0 * scale);
    CHECK(as_double(only(h, 3, 1)) == 10);
    double sum = 0, sum_squares = 0;
    for (double x : v) sum += x, sum_squares += x * x;
    CHECK(as_double(only(h, 4, 1)) == doctest::Approx(sum));
    CHECK(as_double(only(h, 5, 1)) == doctest::Approx(sum_squares));
    const auto limits = packed_doubles(only(h, 6, 2));
    const auto counts = packed_doubles(only(h, 7, 2));
    REQUIRE(limits.size() == static_cast<std::size_t>(buckets));
    for (int i = 0; i < buckets; ++i)
      CHECK(limits[static_cast<std::size_t>(i)] == doctest::Approx(scale * (-1.0 + 3.0 * (i + 1) / buckets)));
    CHECK(counts == naive_counts(v, limits));
    if (k == 0) CHECK(counts == std::vector<double>{2, 5, 1, 2});  // (-inf, -0.25], (-0.25, 0.5], (0.5, 1.25], (1.25, 2]
  }
  const auto constant = decode(only(events[2].value, 5, 2).bytes);
  CHECK(as_double(only(constant, 1, 1)) == 7);
  CHECK(as_double(only(constant, 2, 1)) == 7);
  CHECK(packed_doubles(only(constant, 6, 2)) == std::vector<double>{7});
  CHECK(packed_doubles(only(constant, 7, 2)) == std::vector<double>{3});
  const auto empty = decode(only(events[3].value, 5, 2).bytes);
  CHECK(as_double(only(empty, 3, 1)) == 0);
  CHECK(packed_doubles(only(empty, 7, 2)) == std::vector<double>{0});
}

TEST_CASE("summary_writer: images are PNG files that decode to the pixels") {
  scratch_dir dir;
  const auto gray = fx::from_vector(std::vector<float>{0.f, 0.5f, 1.f, 0.25f, -3.f, 7.f}, {2, 3});  // clipped to [0, 1]
  fx::tensor<int> gray1(fx::shape{3, 2, 1});
  for (int i = 0; i < 6; ++i) gray1.mutable_data()[i] = i * 51;
  // 130 x 200 x 3 = 78,000 bytes of pixels: two stored deflate blocks.
  fx::tensor<double> rgb(fx::shape{130, 200, 3});
  for (fx::index_t i = 0; i < rgb.size(); ++i) rgb.mutable_data()[i] = static_cast<double>((i * 7919) % 1000) / 999.0;
  fx::tensor<float> rgba(fx::shape{1, 2, 4});
  for (int i = 0; i < 8; ++i) rgba.mutable_data()[i] = static_cast<float>(i) / 7.f;
  {
    fx::summary_writer log{dir.path.string()};
    log.image("gray", gray, 1);
    log.image("gray1", gray1, 2);
    log.image("rgb", rgb, 3);
    log.image("rgba", rgba, 4);
    log.image("mask", fx::tensor<bool>{{true, false}}, 5);
  }
  const auto events = read_events(event_file(dir.path));
  REQUIRE(events.size() == 5);
  struct expected {
    std::string tag;
    std::uint32_t height, width;
    int colorspace, color_type;
    std::vector<unsigned char> pixels;
  };
  std::vector<expected> want = {{"gray", 2, 3, 1, 0, {}}, {"gray1", 3, 2, 1, 0, {0, 51, 102, 153, 204, 255}},
                                {"rgb", 130, 200, 3, 2, {}}, {"rgba", 1, 2, 4, 6, {}}, {"mask", 1, 2, 1, 0, {255, 0}}};
  for (float v : gray.to_vector()) want[0].pixels.push_back(expected_byte(v));
  for (double v : rgb.to_vector()) want[2].pixels.push_back(expected_byte(v));
  for (float v : rgba.to_vector()) want[3].pixels.push_back(expected_byte(v));
  CHECK(want[0].pixels == std::vector<unsigned char>{0, 128, 255, 64, 0, 255});
  for (std::size_t i = 0; i < events.size(); ++i) {
    CAPTURE(i);
    CHECK(events[i].tag == want[i].tag);
    CHECK(events[i].step == static_cast<std::int64_t>(i + 1));
    const auto image = decode(only(events[i].value, 4, 2).bytes);
    CHECK(only(image, 1, 0).value == want[i].height);
    CHECK(only(image, 2, 0).value == want[i].width);
    CHECK(only(image, 3, 0).value == static_cast<std::uint64_t>(want[i].colorspace));
    const auto png = decode_png(only(image, 4, 2).bytes);
    CHECK(png.height == want[i].height);
    CHECK(png.width == want[i].width);
    CHECK(png.color_type == want[i].color_type);
    CHECK(png.pixels == want[i].pixels);
  }
}

TEST_CASE("summary_writer: flushes every max_queue events, after flush_seconds, on flush() and on destruction") {
  scratch_dir dir;
  const auto size = [](const std::string& p) { return std::filesystem::file_size(p); };
  {
    fx::summary_writer log{dir.file("queue"), {.flush_seconds = 3600, .max_queue = 3}};
    const auto header = size(log.path());
    CHECK(header > 0);  // the file_version event is in the file from the start
    log.scalar("a", 1.f, 1);
    log.scalar("a", 2.f, 2);
    CHECK(size(log.path()) == header);  // buffered
    log.scalar("a", 3.f, 3);
    const auto three = size(log.path());
    CHECK(three > header);              // the third event flushed all three
    CHECK(read_events(log.path()).size() == 3);
    log.scalar("a", 4.f, 4);
    CHECK(size(log.path()) == three);
    log.flush();
    CHECK(read_events(log.path()).size() == 4);
  }
  std::string path;
  {
    fx::summary_writer log{dir.file("seconds"), {.flush_seconds = 0, .max_queue = 1000}};
    path = log.path();
    log.scalar("a", 1.f, 1);
    CHECK(read_events(path).size() == 1);  // flush_seconds = 0: every write is flushed
  }
  {
    fx::summary_writer log{dir.file("destructor"), {.flush_seconds = 3600, .max_queue = 1000}};
    path = log.path();
    for (int i = 0; i < 5; ++i) log.scalar("a", static_cast<float>(i), i);
    CHECK(read_events(path).empty());
  }
  const auto events = read_events(path);
  REQUIRE(events.size() == 5);
  CHECK(as_float(only(events[4].value, 2, 5)) == 4.f);
}

TEST_CASE("summary_writer: two writers in one directory write two files") {
  scratch_dir dir;
  fx::summary_writer a{dir.path.string()}, b{dir.path.string()};
  CHECK(a.path() != b.path());
  a.scalar("x", 1.f, 1);
  b.scalar("x", 2.f, 1);
  a.flush();
  b.flush();
  CHECK(as_float(only(read_events(a.path()).at(0).value, 2, 5)) == 1.f);
  CHECK(as_float(only(read_events(b.path()).at(0).value, 2, 5)) == 2.f);
}

TEST_CASE("summary_writer: restart_at writes TensorFlow's SessionLog START event at the step, flushed") {
  scratch_dir dir;
  fx::summary_writer log{dir.path.string()};
  log.scalar("loss", 0.5, 3);
  log.restart_at(6);
  const auto records = read_records(log.path());  // no flush(): restart_at flushed
  REQUIRE(records.size() == 3);
  const auto event = decode(records[2]);
  CHECK(static_cast<std::int64_t>(only(event, 2, 0).value) == 6);
  CHECK_FALSE(has(event, 5));
  const auto session_log = decode(only(event, 7, 2).bytes);
  CHECK(only(session_log, 1, 0).value == 1);  // SessionLog.START
  CHECK_THROWS_WITH_AS(log.restart_at(-1), "summary_writer::restart_at: step = -1 is negative", fx::invalid_argument);
}

TEST_CASE("summary_writer: errors name the op, the path or the tag") {
  using test::check_throws_with;
  scratch_dir dir;
  std::ofstream(dir.file("a_file")) << "x";
  const std::string bad = dir.file("a_file") + "/runs";
  check_throws_with<fx::io_error>([&] { fx::summary_writer log{bad}; },
                                  "summary_writer: '" + bad + "': cannot create the log directory: ");
  check_throws_with<fx::io_error>([&] { fx::summary_writer log{dir.file("a_file")}; },
                                  "summary_writer: '" + dir.file("a_file") +
                                      "': cannot create the log directory");
  check_throws_with<fx::invalid_argument>([&] { fx::summary_writer log{""}; },
                                          "summary_writer: the log directory is empty");

  fx::summary_writer log{dir.path.string()};
  check_throws_with<fx::invalid_argument>(
      [&] { log.scalar("loss", fx::tensor<float>{1.f, 2.f}, 1); },
      "summary_writer::scalar: tag 'loss': the tensor has shape (2,) (2 elements); a scalar summary needs exactly 1 "
      "(reduce it first, e.g. with reduce_mean)");
  check_throws_with<fx::invalid_argument>([&] { log.scalar("", 1.f, 1); },
                                          "summary_writer::scalar: the tag is empty; name the series, e.g. \"loss\"");
  check_throws_with<fx::invalid_argument>(
      [&] { log.histogram("h", fx::from_vector(std::vector<float>{1.f, NAN}, {2}), 1); },
      "summary_writer::histogram: tag 'h': element 1 of the tensor of shape (2,) is nan; histograms need finite values");
  check_throws_with<fx::invalid_argument>([&] { log.histogram("h", fx::tensor<float>{1.f}, 1, 0); },
                                          "summary_writer::histogram: tag 'h': buckets = 0 must be at least 1");
  check_throws_with<fx::invalid_argument>(
      [&] { log.image("img", fx::zeros<float>({2, 1, 2}), 1); },
      "summary_writer::image: tag 'img': the tensor has shape (2, 1, 2); an image is (height, width) or (height, "
      "width, channels) with 1, 3 or 4 channels");
  check_throws_with<fx::invalid_argument>([&] { log.image("img", fx::zeros<float>({0, 3}), 1); },
                                          "summary_writer::image: tag 'img': the image of shape (0, 3) has no pixels");
  check_throws_with<fx::invalid_argument>(
      [&] { log.image("img", fx::tensor<int>{{0, 300}}, 1); },
      "summary_writer::image: tag 'img': pixel 1 is 300; integer pixels must lie in [0, 255] (floating-point ones in "
      "[0, 1])");
  check_throws_with<fx::invalid_argument>([&] { log.image("img", fx::tensor<float>{{NAN}}, 1); },
                                          "summary_writer::image: tag 'img': pixel 0 is nan");
  // Nothing was written by the refused calls.
  log.flush();
  CHECK(read_events(log.path()).empty());
}

TEST_CASE("summary_writer: a write failure throws io_error naming the file") {
  scratch_dir dir;
  fx::summary_writer log{dir.path.string(), {.flush_seconds = 0}};
  fx::tensor<float> big(fx::shape{100, 100, 3});
  std::fill(big.mutable_data(), big.mutable_data() + big.size(), 0.5f);
  std::string what;
  {
    // Files may not grow past 4 KiB for a moment; SIGXFSZ ignored, so write() fails with EFBIG.
    rlimit old{};
    ::getrlimit(RLIMIT_FSIZE, &old);
    rlimit small = old;
    small.rlim_cur = 4096;
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    ::setrlimit(RLIMIT_FSIZE, &small);
    try {
      log.image("big", big, 1);
      what = "(no exception)";
    } catch (const fx::io_error& e) {
      what = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, old_handler);
  }
  INFO("message: " << what);
  CHECK(what.rfind("summary_writer::image: ", 0) == 0);
  CHECK(what.find(log.path()) != std::string::npos);
}

TEST_CASE("summary_writer: TensorBoard's EventAccumulator reads the files") {
  std::string python;
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(candidate) + " -c \"import tensorboard\" > /dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) {
      python = candidate;
      break;
    }
  }
  if (python.empty()) {
    MESSAGE("skipped: no Python with the tensorboard package (python3 -m pip install tensorboard)");
    return;
  }
  scratch_dir dir;
  const auto log_dir = dir.path / "run";
  fx::tensor<float> pixels(fx::shape{2, 3, 3});
  for (int i = 0; i < 18; ++i) pixels.mutable_data()[i] = static_cast<float>(i) / 17.f;
  const auto hist = fx::from_vector(std::vector<float>{-1.f, 0.f, 0.25f, 0.5f, 0.5f, 2.f, 1.f, -0.75f, 1.5f, 0.f}, {10});
  {
    fx::summary_writer log{log_dir.string()};
    for (int step = 0; step < 20; ++step) log.scalar("loss", 1.f / static_cast<float>(step + 1), step);
    log.scalar("accuracy", 0.875, 19);
    log.histogram("weights", hist, 7, 4);
    log.image("input", pixels, 9);
  }
  const std::string script = std::string(FLUXION_TEST_FIXTURES_DIR) + "/../io/read_events.py";
  const auto read_with_tensorboard = [&](const std::filesystem::path& logs) {
    const std::string output = dir.file("events.jsonl");
    const std::string command =
        python + " \"" + script + "\" \"" + logs.string() + "\" > \"" + output + "\" 2> \"" + dir.file("stderr") + "\"";
    const int status = std::system(command.c_str());
    INFO("read_events.py stderr: " << read_bytes(dir.file("stderr")));
    REQUIRE(status == 0);
    return read_lines(output);
  };

  // A run interrupted after step 10 and resumed from its checkpoint of step 5: the second file's
  // restart_at(6) makes TensorBoard drop the first file's steps 6-10, which the resumed run writes again.
  {
    const auto resumed_dir = dir.path / "resumed";
    {
      fx::summary_writer first{resumed_dir.string()};
      for (int step = 1; step <= 10; ++step) first.scalar("loss", step, step);
    }
    fx::summary_writer second{resumed_dir.string()};
    second.restart_at(6);
    for (int step = 6; step <= 8; ++step) second.scalar("loss", 100 + step, step);
    second.flush();
    const auto lines = read_with_tensorboard(resumed_dir);
    REQUIRE(lines.size() == 8);
    for (int step = 1; step <= 8; ++step) {
      const auto& l = lines[static_cast<std::size_t>(step - 1)];
      CAPTURE(step);
      CHECK(std::stoi(l.at("step")) == step);
      CHECK(std::stod(l.at("value")) == (step <= 5 ? step : 100 + step));
    }
  }

  auto lines = read_with_tensorboard(log_dir);
  const auto numbers = [](const std::string& list) {
    std::vector<double> v;
    for (std::size_t p = 1; p < list.size() - 1;) {
      std::size_t used = 0;
      v.push_back(std::stod(list.substr(p), &used));
      p += used + 2;  // ", "
    }
    return v;
  };
  REQUIRE(lines.size() == 23);
  CHECK(lines[0]["tag"] == "\"accuracy\"");
  CHECK(lines[0]["step"] == "19");
  CHECK(std::stod(lines[0]["value"]) == 0.875);
  for (int step = 0; step < 20; ++step) {
    const auto& l = lines[static_cast<std::size_t>(1 + step)];
    CAPTURE(step);
    CHECK(l.at("kind") == "\"scalar\"");
    CHECK(l.at("tag") == "\"loss\"");
    CHECK(std::stoi(l.at("step")) == step);
    CHECK(static_cast<float>(std::stod(l.at("value"))) == 1.f / static_cast<float>(step + 1));
  }
  auto& h = lines[21];
  CHECK(h["kind"] == "\"histogram\"");
  CHECK(h["tag"] == "\"weights\"");
  CHECK(h["step"] == "7");
  CHECK(std::stod(h["num"]) == 10);
  CHECK(std::stod(h["min"]) == -1);
  CHECK(std::stod(h["max"]) == 2);
  CHECK(numbers(h["bucket"]) == std::vector<double>{2, 5, 1, 2});
  CHECK(numbers(h["bucket_limit"]) == std::vector<double>{-0.25, 0.5, 1.25, 2});
  auto& img = lines[22];
  CHECK(img["kind"] == "\"image\"");
  CHECK(img["tag"] == "\"input\"");
  CHECK(img["step"] == "9");
  CHECK(img["width"] == "3");
  CHECK(img["height"] == "2");
  if (img.count("pixels")) {
    std::vector<double> want;
    for (float v : pixels.to_vector()) want.push_back(expected_byte(v));
    CHECK(numbers(img["pixels"]) == want);  // decoded by Pillow
  } else {
    MESSAGE("Pillow is missing: the image's pixels were not decoded by Python");
  }
}

}  // namespace io_summary_test
