// TensorBoard summaries: scalars, histograms and images written to an event file that
// `tensorboard --logdir runs` shows.
//
//   fx::summary_writer log{"runs/cnn"};                    // creates runs/cnn if it is missing
//   log.scalar("loss", l, step);                           // a float, a double or a one-element tensor
//   log.histogram("dense/kernel", w, step);                // 30 equal-width buckets over [min, max]
//   log.image("input", x, step);                           // (H, W), (H, W, 1), (H, W, 3) or (H, W, 4)
//   log.flush();                                           // or wait: see summary_options
//   log.restart_at(step);                                  // a resumed run: TensorBoard drops the
//                                                          // directory's older events from `step` on
//
// The file is `events.out.tfevents.<seconds>.<hostname>` in the log directory (with `.1`, `.2` ...
// appended when a file of that name exists already). Its records use the TFRecord framing
// (io/tfrecord.hpp); each holds one tensorflow.Event protocol buffer, encoded here by hand, so
// neither libprotobuf nor zlib is needed. The first event carries file_version "brain.Event:2";
// each call then writes Event{wall_time, step, summary{value{tag, ...}}} with the field numbers of
// tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto.
//
// - Scalars are stored as Summary.Value.simple_value, a float.
// - Histograms are HistogramProto with min, max, num, sum and sum_squares, and `buckets`
//   equal-width buckets over [min, max]: bucket i counts the values in
//   (bucket_limit[i-1], bucket_limit[i]] (the first one also holds min), as TensorBoard reads them.
//   This is simpler than TensorFlow's exponential bucket layout, and TensorBoard shows it as is.
//   Values must be finite; a constant tensor gives one bucket.
// - restart_at(step) writes Event{wall_time, step, session_log{status: START}}, TensorFlow's
//   SessionLog that marks a restarted run: TensorBoard's EventAccumulator then discards the events
//   of step `step` and later that it read before (the interrupted run's, which the resumed run
//   writes again), so the curves do not double back. fx::tensorboard_callback writes it when fit
//   resumes a run.
// - Images are PNG files: 8 bits per channel, gray, RGB or RGBA, compressed with stored
//   (uncompressed) deflate blocks. Floating-point pixels are clipped to [0, 1] and scaled by 255,
//   as tf.summary.image does; integer pixels must lie in [0, 255]; bool pixels become 0 or 255.
//
// Events are buffered and flushed when `flush_seconds` have passed since the last flush (checked
// on each write: there is no background thread), every `max_queue` events, by flush(), and by the
// destructor. Failures throw fluxion::io_error naming the function and the path; bad arguments throw
// fluxion::invalid_argument naming the function and the tag.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if __has_include(<unistd.h>)
#include <unistd.h>
#endif

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../expr/forward.hpp"
#include "../tensor/tensor.hpp"
#include "prebuilt.hpp"
#include "tfrecord.hpp"

namespace fluxion::io {
namespace detail {

// ---- the protocol buffer wire format, for the few field kinds an Event needs ----

enum class wire_type : std::uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

inline void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
inline void put_key(std::string& out, std::uint32_t field, wire_type type) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint32_t>(type));
}
inline void put_fixed(std::string& out, std::uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((bits >> (8 * i)) & 0xFF);
}
/// int32 and int64 fields: a negative value is its 64-bit two's complement, ten bytes long.
inline void put_int_field(std::string& out, std::uint32_t field, std::int64_t v) {
  put_key(out, field, wire_type::varint);
  put_varint(out, static_cast<std::uint64_t>(v));
}
inline void put_double_field(std::string& out, std::uint32_t field, double v) {
  put_key(out, field, wire_type::fixed64);
  put_fixed(out, std::bit_cast<std::uint64_t>(v), 8);
}
inline void put_float_field(std::string& out, std::uint32_t field, float v) {
  put_key(out, field, wire_type::fixed32);
  put_fixed(out, std::bit_cast<std::uint32_t>(v), 4);
}
inline void put_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, wire_type::length_delimited);
  put_varint(out, bytes.size());
  out += bytes;
}
inline void put_packed_doubles(std::string& out, std::uint32_t field, const std::vector<double>& values) {
  if (values.empty()) return;  // an empty packed field is simply absent
  put_key(out, field, wire_type::length_delimited);
  put_varint(out, values.size() * 8);
  for (double v : values) put_fixed(out, std::bit_cast<std::uint64_t>(v), 8);
}

// Field numbers, from tensorflow/core/util/event.proto and tensorflow/core/framework/summary.proto.
namespace event_field {
inline constexpr std::uint32_t wall_time = 1, step = 2, file_version = 3, summary = 5, session_log = 7;
}
namespace session_log_field {
inline constexpr std::uint32_t status = 1;
inline constexpr std::int64_t start = 1;  // SessionLog.SessionStatus.START
}
namespace summary_field {
inline constexpr std::uint32_t value = 1;
}
namespace value_field {
inline constexpr std::uint32_t tag = 1, simple_value = 2, image = 4, histo = 5;
}
namespace histogram_field {
inline constexpr std::uint32_t min = 1, max = 2, num = 3, sum = 4, sum_squares = 5, bucket_limit = 6, bucket = 7;
}
namespace image_field {
inline constexpr std::uint32_t height = 1, width = 2, colorspace = 3, encoded_image_string = 4;
}

/// Event{wall_time, step, summary{value{<value_fields>}}}; `value_fields` already holds the tag.
inline std::string summary_event(double wall_time, std::int64_t step, const std::string& value_fields) {
  std::string summary;
  put_bytes_field(summary, summary_field::value, value_fields);
  std::string event;
  put_double_field(event, event_field::wall_time, wall_time);
  put_int_field(event, event_field::step, step);
  put_bytes_field(event, event_field::summary, summary);
  return event;
}

// ---- PNG, with stored deflate blocks ----

/// CRC-32 (ISO 3309, the reflected polynomial 0xEDB88320) as PNG chunks carry it; the table is built at
/// run time on first use (see detail::crc32c_tables).
struct crc32_table {
  std::array<std::uint32_t, 256> t{};
  crc32_table() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
      t[i] = c;
    }
  }
};
inline const crc32_table& png_crc_table() {
  static const crc32_table table;
  return table;
}

inline std::uint32_t crc32(std::string_view bytes) noexcept {
  const auto& t = png_crc_table().t;
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : bytes) c = t[(c ^ b) & 0xFF] ^ (c >> 8);
  return ~c;
}

inline std::uint32_t adler32(std::string_view bytes) noexcept {
  std::uint32_t a = 1, b = 0;
  std::size_t i = 0;
  while (i < bytes.size()) {
    // 5552 bytes is the most that can be summed before b overflows 32 bits (zlib's NMAX).
    const std::size_t end = std::min(bytes.size(), i + 5552);
    for (; i < end; ++i) {
      a += static_cast<unsigned char>(bytes[i]);
      b += a;
    }
    a %= 65521;
    b %= 65521;
  }
  return (b << 16) | a;
}

inline void put_be32(std::string& out, std::uint32_t v) {
  for (int i = 3; i >= 0; --i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}

inline void put_png_chunk(std::string& out, const char (&type)[5], std::string_view data) {
  put_be32(out, static_cast<std::uint32_t>(data.size()));
  std::string typed(type, 4);
  typed += data;
  out += typed;
  put_be32(out, crc32(typed));
}

/// A zlib stream (RFC 1950) of stored deflate blocks (RFC 1951, BTYPE 00): no compression.
inline std::string zlib_stored(std::string_view data) {
  std::string out = "\x78\x01";  // deflate, 32 KiB window; (0x78 * 256 + 0x01) % 31 == 0
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(data.size() - pos, 65535);
    const bool final = pos + n == data.size();
    out += static_cast<char>(final ? 1 : 0);  // BFINAL, BTYPE 00, then padding to the byte
    out += static_cast<char>(n & 0xFF);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(~n & 0xFF);
    out += static_cast<char>((~n >> 8) & 0xFF);
    out.append(data.substr(pos, n));
    pos += n;
  } while (pos < data.size());
  put_be32(out, adler32(data));
  return out;
}

/// An 8-bit PNG of `channels` (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA) interleaved row-major pixels.
inline std::string encode_png(const std::vector<unsigned char>& pixels, std::uint32_t height, std::uint32_t width,
                              int channels) {
  static constexpr unsigned char color_type[] = {0, 0, 4, 2, 6};
  std::string header;
  put_be32(header, width);
  put_be32(header, height);
  header += '\x08';                                    // bit depth
  header += static_cast<char>(color_type[channels]);
  header += std::string(3, '\0');                      // deflate, adaptive filtering, no interlace
  const std::size_t row = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  std::string scanlines;
  scanlines.reserve(static_cast<std::size_t>(height) * (row + 1));
  for (std::uint32_t y = 0; y < height; ++y) {
    scanlines += '\0';  // filter type 0 (None)
    scanlines.append(reinterpret_cast<const char*>(pixels.data()) + y * row, row);
  }
  std::string png = "\x89PNG\r\n\x1a\n";
  put_png_chunk(png, "IHDR", header);
  put_png_chunk(png, "IDAT", zlib_stored(scanlines));
  put_png_chunk(png, "IEND", {});
  return png;
}

// ---- reading values out of the arguments ----

/// The values of a tensor, an expression or a variable, on the host, with its shape.
template <class X>
auto host_values(const X& x) {
  if constexpr (is_variable_v<std::remove_cvref_t<X>>) {
    return host_values(x.value());
  } else {
    static_assert(is_expression_v<X>,
                  "fluxion::summary_writer: pass a tensor, an expression or a variable (or a number to scalar()).");
    using T = value_type_t<X>;
    if constexpr (is_tensor_v<std::remove_cvref_t<X>>) {
      return std::pair{x.to_vector(), x.shape()};
    } else {
      const tensor<T, device_t<X>> t(x);
      return std::pair{t.to_vector(), t.shape()};
    }
  }
}

inline std::string host_name() {
#if __has_include(<unistd.h>)
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') return name;
#endif
  if (const char* env = std::getenv("COMPUTERNAME")) return env;
  return "localhost";
}

inline double seconds_since_epoch() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline std::string format_number(double v) {
  std::string s = std::to_string(v);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace detail

/// When a summary_writer hands its buffered events to the operating system.
struct summary_options {
  /// Flush when this many seconds have passed since the last flush (checked on each write).
  double flush_seconds = 10.0;
  /// Flush after this many events.
  std::size_t max_queue = 10;
};

/// Writes one TensorBoard event file in a log directory; see the top of this header.
class summary_writer {
 public:
  explicit summary_writer(std::string log_dir, summary_options options = {});

  summary_writer(const summary_writer&) = delete;
  summary_writer& operator=(const summary_writer&) = delete;
  summary_writer(summary_writer&&) noexcept = default;
  summary_writer& operator=(summary_writer&& other) noexcept;
  /// Flushes; a failure here cannot be reported, so call flush() to see it.
  ~summary_writer();

  /// A scalar: a number, or a tensor, expression or variable with one element. Stored as a float.
  template <class V>
  void scalar(std::string_view tag, const V& value, std::int64_t step);

  /// A histogram of every element of a tensor, expression or variable, in `buckets` equal-width
  /// buckets over [min, max].
  template <class X>
  void histogram(std::string_view tag, const X& values, std::int64_t step, int buckets = 30);

  /// An image of shape (H, W) or (H, W, C) with C = 1 (gray), 3 (RGB) or 4 (RGBA), stored as a PNG.
  template <class X>
  void image(std::string_view tag, const X& pixels, std::int64_t step);

  /// Marks a restarted run at `step` (TensorFlow's SessionLog START event): TensorBoard discards
  /// the events of step `step` and later that it read before this one, in this directory's older
  /// files too. A resumed run calls it with the first step it writes again. Flushed at once.
  void restart_at(std::int64_t step);

  /// Hands every buffered event to the operating system.
  void flush();

  /// The log directory, as given.
  const std::string& log_dir() const noexcept { return m_log_dir; }
  /// The event file being written.
  const std::string& path() const noexcept { return m_path; }
  /// Summaries written so far (the file_version event not counted).
  std::uint64_t events() const noexcept { return m_events; }

 private:
  static void check_tag(const char* op, std::string_view tag) {
    if (tag.empty()) throw invalid_argument(std::string(op) + ": the tag is empty; name the series, e.g. \"loss\"");
  }

  std::string unused_file_name(std::int64_t seconds) const;

  void write_event(const char* op, std::int64_t step, const std::string& value_fields);

  void flush_records(const char* op);

  void close_quietly() noexcept;

  std::string m_log_dir;
  std::string m_path;
  summary_options m_options;
  std::unique_ptr<tfrecord_writer> m_out;  // null once moved from
  std::size_t m_pending = 0;               // events written since the last flush
  std::uint64_t m_events = 0;
  std::chrono::steady_clock::time_point m_last_flush;
};


// The member templates, outside the class so that programs with prebuilt I/O can declare the
// common ones `extern template` (below, and io/prebuilt.hpp).
template <class V>
FLUXION_IO_TEMPLATE_INLINE void summary_writer::scalar(std::string_view tag, const V& value, std::int64_t step) {
  check_tag("summary_writer::scalar", tag);
  double v;
  if constexpr (is_scalar_v<V>) {
    v = static_cast<double>(value);
  } else {
    const auto [values, s] = detail::host_values(value);
    if (values.size() != 1)
      throw invalid_argument("summary_writer::scalar: tag '" + std::string(tag) + "': the tensor has shape " +
                             to_string(s) + " (" + std::to_string(values.size()) +
                             " elements); a scalar summary needs exactly 1 (reduce it first, e.g. with reduce_mean)");
    v = static_cast<double>(values[0]);
  }
  std::string fields;
  detail::put_bytes_field(fields, detail::value_field::tag, tag);
  detail::put_float_field(fields, detail::value_field::simple_value, static_cast<float>(v));
  write_event("summary_writer::scalar", step, fields);
}

template <class X>
FLUXION_IO_TEMPLATE_INLINE void summary_writer::histogram(std::string_view tag, const X& values, std::int64_t step, int buckets) {
  check_tag("summary_writer::histogram", tag);
  if (buckets < 1)
    throw invalid_argument("summary_writer::histogram: tag '" + std::string(tag) + "': buckets = " +
                           std::to_string(buckets) + " must be at least 1");
  const auto [raw, s] = detail::host_values(values);
  double lo = 0, hi = 0, sum = 0, sum_squares = 0;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const double v = static_cast<double>(raw[i]);
    if (!std::isfinite(v))
      throw invalid_argument("summary_writer::histogram: tag '" + std::string(tag) + "': element " +
                             std::to_string(i) + " of the tensor of shape " + to_string(s) + " is " +
                             detail::format_number(v) + "; histograms need finite values");
    lo = i == 0 ? v : std::min(lo, v);
    hi = i == 0 ? v : std::max(hi, v);
    sum += v;
    sum_squares += v * v;
  }
  if (lo == hi) buckets = 1;  // a constant (or empty) tensor: one bucket ending at the value
  std::vector<double> limits(static_cast<std::size_t>(buckets)), counts(static_cast<std::size_t>(buckets), 0.0);
  const double width = (hi - lo) / buckets;
  for (int b = 0; b < buckets; ++b) limits[static_cast<std::size_t>(b)] = b + 1 == buckets ? hi : lo + (b + 1) * width;
  for (const auto& x : raw) {
    const double v = static_cast<double>(x);
    // bucket b holds (limits[b-1], limits[b]]: the first limit at or above v
    const auto b = std::lower_bound(limits.begin(), limits.end(), v) - limits.begin();
    counts[static_cast<std::size_t>(std::min<std::ptrdiff_t>(b, buckets - 1))] += 1;
  }
  std::string histo;
  detail::put_double_field(histo, detail::histogram_field::min, lo);
  detail::put_double_field(histo, detail::histogram_field::max, hi);
  detail::put_double_field(histo, detail::histogram_field::num, static_cast<double>(raw.size()));
  detail::put_double_field(histo, detail::histogram_field::sum, sum);
  detail::put_double_field(histo, detail::histogram_field::sum_squares, sum_squares);
  detail::put_packed_doubles(histo, detail::histogram_field::bucket_limit, limits);
  detail::put_packed_doubles(histo, detail::histogram_field::bucket, counts);
  std::string fields;
  detail::put_bytes_field(fields, detail::value_field::tag, tag);
  detail::put_bytes_field(fields, detail::value_field::histo, histo);
  write_event("summary_writer::histogram", step, fields);
}

template <class X>
FLUXION_IO_TEMPLATE_INLINE void summary_writer::image(std::string_view tag, const X& pixels, std::int64_t step) {
  check_tag("summary_writer::image", tag);
  const auto [raw, s] = detail::host_values(pixels);
  using T = typename std::remove_cvref_t<decltype(raw)>::value_type;
  const auto bad = [&](const std::string& what) {
    return invalid_argument("summary_writer::image: tag '" + std::string(tag) + "': " + what);
  };
  const index_t depth = s.rank() == 2 ? 1 : s.rank() == 3 ? s[2] : 0;
  if (depth != 1 && depth != 3 && depth != 4)
    throw bad("the tensor has shape " + to_string(s) +
              "; an image is (height, width) or (height, width, channels) with 1, 3 or 4 channels");
  const int channels = static_cast<int>(depth);
  if (s[0] < 1 || s[1] < 1) throw bad("the image of shape " + to_string(s) + " has no pixels");
  // One PNG chunk holds at most 2^31 - 1 bytes: the scanlines, their filter bytes and the
  // 5-byte header of each 65535-byte stored block must fit.
  constexpr double png_limit = 2147483647.0 * 65535 / 65540 - 64;
  if (static_cast<double>(s[0]) * (static_cast<double>(s[1]) * channels + 1) > png_limit)
    throw bad("the image of shape " + to_string(s) + " is too large for one PNG chunk (2 GiB)");
  std::vector<unsigned char> bytes(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      bytes[i] = raw[i] ? 255 : 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      const double v = static_cast<double>(raw[i]);
      if (std::isnan(v)) throw bad("pixel " + std::to_string(i) + " is nan");
      bytes[i] = static_cast<unsigned char>(std::lround(std::clamp(v, 0.0, 1.0) * 255.0));
    } else {
      if (raw[i] < 0 || raw[i] > 255)
        throw bad("pixel " + std::to_string(i) + " is " + std::to_string(raw[i]) +
                  "; integer pixels must lie in [0, 255] (floating-point ones in [0, 1])");
      bytes[i] = static_cast<unsigned char>(raw[i]);
    }
  }
  const auto height = static_cast<std::uint32_t>(s[0]), width = static_cast<std::uint32_t>(s[1]);
  std::string image;
  detail::put_int_field(image, detail::image_field::height, height);
  detail::put_int_field(image, detail::image_field::width, width);
  detail::put_int_field(image, detail::image_field::colorspace, channels);  // 1 gray, 3 RGB, 4 RGBA
  detail::put_bytes_field(image, detail::image_field::encoded_image_string,
                          detail::encode_png(bytes, height, width, channels));
  std::string fields;
  detail::put_bytes_field(fields, detail::value_field::tag, tag);
  detail::put_bytes_field(fields, detail::value_field::image, image);
  write_event("summary_writer::image", step, fields);
}

#if FLUXION_IO_DEFINITIONS
// In src/io.cpp where the program uses prebuilt kernels (io/prebuilt.hpp); inline otherwise.
FLUXION_IO_INLINE summary_writer::summary_writer(std::string log_dir, summary_options options)
    : m_log_dir(std::move(log_dir)), m_options(options) {
  if (m_log_dir.empty())
    throw invalid_argument("summary_writer: the log directory is empty; name one, e.g. \"runs/cnn\"");
  if (!(m_options.flush_seconds >= 0))
    throw invalid_argument("summary_writer: '" + m_log_dir + "': flush_seconds must be >= 0, not " +
                           detail::format_number(m_options.flush_seconds));
  if (const int code = detail::make_directories(m_log_dir))
    throw io_error("summary_writer: '" + m_log_dir + "': cannot create the log directory: " +
                   (code == ENOTDIR && detail::stat_path(m_log_dir).kind != detail::file_kind::missing
                        ? std::string("a file of that name exists")
                        : detail::error_text(code)));
  const double now = detail::seconds_since_epoch();
  m_path = unused_file_name(static_cast<std::int64_t>(now));
  try {
    m_out = std::make_unique<tfrecord_writer>(m_path);
    std::string event;
    detail::put_double_field(event, detail::event_field::wall_time, now);
    detail::put_bytes_field(event, detail::event_field::file_version, "brain.Event:2");
    m_out->write(event);
    m_out->flush();  // the file is valid, and visible to TensorBoard, from the start
  } catch (const io_error& e) {
    throw io_error(std::string("summary_writer: ") + e.what());
  }
  m_last_flush = std::chrono::steady_clock::now();
}

FLUXION_IO_INLINE summary_writer& summary_writer::operator=(summary_writer&& other) noexcept {
  if (this != &other) {
    close_quietly();
    m_log_dir = std::move(other.m_log_dir);
    m_path = std::move(other.m_path);
    m_options = other.m_options;
    m_out = std::move(other.m_out);
    m_pending = other.m_pending;
    m_events = other.m_events;
    m_last_flush = other.m_last_flush;
  }
  return *this;
}

FLUXION_IO_INLINE summary_writer::~summary_writer() { close_quietly(); }

FLUXION_IO_INLINE void summary_writer::flush() { flush_records("summary_writer::flush"); }

FLUXION_IO_INLINE void summary_writer::restart_at(std::int64_t step) {
  const char* op = "summary_writer::restart_at";
  if (step < 0) throw invalid_argument(std::string(op) + ": step = " + std::to_string(step) + " is negative");
  if (!m_out) throw io_error(std::string(op) + ": the writer was moved from");
  std::string session_log;
  detail::put_int_field(session_log, detail::session_log_field::status, detail::session_log_field::start);
  std::string event;
  detail::put_double_field(event, detail::event_field::wall_time, detail::seconds_since_epoch());
  detail::put_int_field(event, detail::event_field::step, step);
  detail::put_bytes_field(event, detail::event_field::session_log, session_log);
  try {
    m_out->write(event);
  } catch (const io_error& e) {
    throw io_error(std::string(op) + ": " + e.what());
  }
  ++m_pending;
  flush_records(op);
}

FLUXION_IO_INLINE std::string summary_writer::unused_file_name(std::int64_t seconds) const {
  const std::string base =
      detail::join_path(m_log_dir, "events.out.tfevents." + std::to_string(seconds) + "." + detail::host_name());
  std::string name = base;
  for (int n = 1; detail::stat_path(name, /*follow_links=*/false).kind != detail::file_kind::missing; ++n)
    name = base + "." + std::to_string(n);
  return name;
}

FLUXION_IO_INLINE void summary_writer::write_event(const char* op, std::int64_t step, const std::string& value_fields) {
  if (!m_out) throw io_error(std::string(op) + ": the writer was moved from");
  try {
    m_out->write(detail::summary_event(detail::seconds_since_epoch(), step, value_fields));
  } catch (const io_error& e) {
    throw io_error(std::string(op) + ": " + e.what());
  }
  ++m_events;
  ++m_pending;
  const std::chrono::duration<double> since = std::chrono::steady_clock::now() - m_last_flush;
  if (m_pending >= m_options.max_queue || since.count() >= m_options.flush_seconds) flush_records(op);
}

FLUXION_IO_INLINE void summary_writer::flush_records(const char* op) {
  if (!m_out) throw io_error(std::string(op) + ": the writer was moved from");
  try {
    m_out->flush();
  } catch (const io_error& e) {
    throw io_error(std::string(op) + ": " + e.what());
  }
  m_pending = 0;
  m_last_flush = std::chrono::steady_clock::now();
}

FLUXION_IO_INLINE void summary_writer::close_quietly() noexcept {
  if (!m_out) return;
  try {
    m_out->flush();
  } catch (...) {  // a destructor cannot report it; flush() does
  }
  m_out.reset();
}
#endif  // FLUXION_IO_DEFINITIONS

}  // namespace fluxion::io

namespace fluxion {
using io::summary_options;
using io::summary_writer;
}  // namespace fluxion

#if FLUXION_IO_PREBUILT
// The summaries of numbers and float tensors, compiled once in src/io.cpp (io/prebuilt.hpp).
namespace fluxion::io {
FLUXION_IO_EXTERN template void summary_writer::scalar<float>(std::string_view, const float&, std::int64_t);
FLUXION_IO_EXTERN template void summary_writer::scalar<double>(std::string_view, const double&, std::int64_t);
FLUXION_IO_EXTERN template void summary_writer::scalar<tensor<float>>(std::string_view, const tensor<float>&, std::int64_t);
FLUXION_IO_EXTERN template void summary_writer::histogram<tensor<float>>(std::string_view, const tensor<float>&, std::int64_t,
                                                                         int);
FLUXION_IO_EXTERN template void summary_writer::image<tensor<float>>(std::string_view, const tensor<float>&, std::int64_t);
}  // namespace fluxion::io
#endif
