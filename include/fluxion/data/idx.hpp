// IDX files (the format of MNIST and Fashion-MNIST), plain or gzip-compressed, as datasets.
//
//   auto images = fx::data::idx_images("train-images-idx3-ubyte.gz");  // tensor<float> (28, 28, 1)
//   auto labels = fx::data::idx_labels("train-labels-idx1-ubyte.gz");  // tensor<std::int32_t> ()
//   auto raw = fx::data::idx<float>("any-idx-file");                    // values as they are
//
// An IDX file is a 4-byte magic (00 00, a type byte: 08 unsigned byte, 09 signed byte, 0B int16,
// 0C int32, 0D float32, 0E float64, then the number of dimensions), the extents as big-endian
// uint32, and the values, big-endian, in row-major order. Each element of the dataset is one slice
// along the first axis.
//   idx_images: a file of unsigned bytes of shape (n, rows, columns); elements are float tensors of
//               shape (rows, columns, 1) (NHWC, one channel, as fx::nn::conv2d takes), scaled to
//               [0, 1] by dividing by 255.
//   idx_labels: a file of unsigned bytes of shape (n); elements are std::int32_t tensors of shape (),
//               so that batch(64) gives the (64,) labels sparse_softmax_cross_entropy takes.
//   idx<T>:     any IDX file; elements of shape (extents after the first), values converted to T.
// The header is read and checked when the dataset is made; the data is streamed as it is iterated.
// .gz files are read through zlib (link fluxion::zlib; see input_file.hpp). A bad magic, other
// extents than expected, or data that ends early throws fluxion::io_error naming the file, the
// byte offset or element, and what was expected.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/tensor.hpp"
#include "dataset.hpp"
#include "input_file.hpp"

namespace fluxion::data {

/// What an IDX file's header says.
struct idx_header {
  int type = 0;                 // 0x08 ... 0x0E
  std::vector<index_t> extents;  // all of them, the first one the number of elements
  std::size_t value_bytes = 1;  // bytes per value
  std::size_t header_bytes = 4;  // magic and extents

  index_t count() const { return extents.empty() ? 1 : extents.front(); }
  shape element_shape() const { return shape(extents.size() > 1 ? extents.begin() + 1 : extents.end(), extents.end()); }
};

namespace detail {

inline std::string hex_bytes(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

inline const char* idx_type_name(int type) {
  switch (type) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

inline idx_header read_idx_header(input_file& in) {
  unsigned char magic[4];
  const std::size_t got = in.read(magic, 4);
  if (got < 4 || magic[0] != 0 || magic[1] != 0 || std::string(idx_type_name(magic[2])) == "unknown")
    file_fail(in.op(), in.path(),
              "bad IDX magic at byte offset 0: the file starts with [" + hex_bytes(magic, got) +
                  "]; an IDX file starts with 00 00, a type byte (08 unsigned byte, 09 signed byte, 0b int16, 0c int32, "
                  "0d float32, 0e float64) and the number of dimensions");
  idx_header h;
  h.type = magic[2];
  const int rank = magic[3];
  h.value_bytes = h.type == 0x0B ? 2 : h.type == 0x0C || h.type == 0x0D ? 4 : h.type == 0x0E ? 8 : 1;
  if (rank > max_rank)
    file_fail(in.op(), in.path(),
              "bad IDX header: " + std::to_string(rank) + " dimensions; fluxion tensors have at most " +
                  std::to_string(max_rank));
  index_t total = 1;
  for (int d = 0; d < rank; ++d) {
    unsigned char b[4];
    if (in.read(b, 4) < 4)
      file_fail(in.op(), in.path(),
                "truncated IDX header: extent " + std::to_string(d) + " of " + std::to_string(rank) + " at byte offset " +
                    std::to_string(4 + 4 * d) + " needs 4 bytes, the data ends at byte offset " +
                    std::to_string(in.offset()) + " (a header of " + std::to_string(4 + 4 * rank) + " bytes)");
    const index_t e = (index_t{b[0]} << 24) | (index_t{b[1]} << 16) | (index_t{b[2]} << 8) | index_t{b[3]};
    if (e != 0 && total > shape::max_elements / e)
      file_fail(in.op(), in.path(), "bad IDX header: the extents describe more than 2^56 values");
    total *= e;
    h.extents.push_back(e);
  }
  // An empty item with items to slice: streaming millions of empty tensors would only hang the
  // reader (found by fuzz/idx.fuzz.cpp: a 12-byte file declaring 134 million items of 0 values).
  for (int d = 1; d < rank; ++d)
    if (h.extents[static_cast<std::size_t>(d)] == 0 && h.extents[0] > 0)
      file_fail(in.op(), in.path(),
                "bad IDX header: extent " + std::to_string(d) + " is 0, so each of the " + std::to_string(h.extents[0]) +
                    " items of shape " + to_string(shape(h.extents)) + " would hold no values");
  h.header_bytes = 4 + 4 * static_cast<std::size_t>(rank);
  if (auto size = in.size()) {  // a plain file: its size must match
    const std::uint64_t want = h.header_bytes + static_cast<std::uint64_t>(total) * h.value_bytes;
    if (*size < want)
      file_fail(in.op(), in.path(),
                "truncated IDX data: shape " + to_string(shape(h.extents)) + " of " + idx_type_name(h.type) + " needs " +
                    std::to_string(want) + " bytes with its header, the file has " + std::to_string(*size));
    if (*size > want)
      file_fail(in.op(), in.path(),
                "bad IDX file: shape " + to_string(shape(h.extents)) + " of " + idx_type_name(h.type) + " needs " +
                    std::to_string(want) + " bytes with its header, the file has " + std::to_string(*size) +
                    " (wrong extents in the header?)");
  }
  return h;
}

inline double idx_value(const unsigned char* p, int type) {
  std::uint64_t u = 0;
  const std::size_t n = type == 0x0B ? 2 : type == 0x0C || type == 0x0D ? 4 : type == 0x0E ? 8 : 1;
  for (std::size_t i = 0; i < n; ++i) u = (u << 8) | p[i];
  switch (type) {
    case 0x08: return static_cast<double>(static_cast<std::uint8_t>(u));
    case 0x09: return static_cast<double>(static_cast<std::int8_t>(u));
    case 0x0B: return static_cast<double>(static_cast<std::int16_t>(u));
    case 0x0C: return static_cast<double>(static_cast<std::int32_t>(u));
    case 0x0D: return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(u)));
    default: return std::bit_cast<double>(u);
  }
}

/// An IDX dataset of elements of type T and shape `element_shape` (of as many values as a slice),
/// each value multiplied by `scale`.
template <class T>
dataset<tensor<T>> idx_dataset(const std::string& path, const std::string& op, const idx_header& h,
                               const shape& element_shape, double scale) {
  const index_t count = h.count();
  return dataset<tensor<T>>(
      [path, op, h, element_shape, scale, count]() -> typename dataset<tensor<T>>::next_fn {
        auto in = std::make_shared<input_file>(path, op);
        const idx_header again = read_idx_header(*in);
        if (again.type != h.type || again.extents != h.extents)
          file_fail(op, path, "the file changed since the dataset was made (another header)");
        const std::size_t values = static_cast<std::size_t>(element_shape.size());
        const std::size_t element_bytes = values * h.value_bytes;
        auto bytes = std::make_shared<std::vector<unsigned char>>();
        return [in, bytes, values, element_bytes, h, element_shape, scale, count, index = index_t{0}]() mutable
                   -> std::optional<tensor<T>> {
          if (index >= count) return std::nullopt;
          const std::uint64_t at = in->offset();
          // Read in chunks, so that memory follows the data that is there: a gzip stream's header
          // may declare elements of gigabytes (found by fuzz/idx.fuzz.cpp), and the truncation is then
          // reported before anything that large is allocated.
          std::size_t got = 0;
          if (bytes->size() < element_bytes) {
            constexpr std::size_t chunk = std::size_t{1} << 20;
            while (got < element_bytes) {
              const std::size_t want = std::min(chunk, element_bytes - got);
              if (bytes->size() < got + want) bytes->resize(got + want);
              const std::size_t n = in->read(bytes->data() + got, want);
              got += n;
              if (n < want) break;
            }
          } else {
            got = in->read(bytes->data(), element_bytes);
          }
          if (got < element_bytes)
            file_fail(in->op(), in->path(),
                      "truncated IDX data: element " + std::to_string(index) + " of " + std::to_string(count) +
                          " at byte offset " + std::to_string(at) + " needs " + std::to_string(element_bytes) +
                          " bytes, the data ends after " + std::to_string(got));
          tensor<T> t(element_shape);
          T* out = t.mutable_data();
          const unsigned char* p = bytes->data();
          if (h.type == 0x08) {
            for (std::size_t i = 0; i < values; ++i) out[i] = static_cast<T>(p[i] * scale);
          } else {
            for (std::size_t i = 0; i < values; ++i) out[i] = static_cast<T>(idx_value(p + i * h.value_bytes, h.type) * scale);
          }
          ++index;
          return t;
        };
      },
      count);
}

}  // namespace detail

/// Reads and checks an IDX file's header.
inline idx_header read_idx_header(const std::string& path) {
  input_file in(path, "read_idx_header");
  return detail::read_idx_header(in);
}

/// Any IDX file: one element per slice along the first axis, values converted to T.
template <class T = float>
dataset<tensor<T>> idx(const std::string& path) {
  input_file in(path, "idx");
  const idx_header h = detail::read_idx_header(in);
  if (h.extents.empty()) detail::file_fail("idx", path, "the IDX file has no dimensions; there is nothing to slice");
  return detail::idx_dataset<T>(path, "idx", h, h.element_shape(), 1.0);
}

/// An IDX file of unsigned-byte images (n, rows, columns): float elements (rows, columns, 1) in [0, 1].
inline dataset<tensor<float>> idx_images(const std::string& path) {
  input_file in(path, "idx_images");
  const idx_header h = detail::read_idx_header(in);
  if (h.type != 0x08 || h.extents.size() != 3)
    detail::file_fail("idx_images", path,
                      "expected images: 3 dimensions (images, rows, columns) of unsigned bytes (magic 00 00 08 03), the "
                      "file has " + std::to_string(h.extents.size()) + " dimension(s) " + to_string(shape(h.extents)) +
                          " of " + detail::idx_type_name(h.type) + (h.extents.size() == 1 ? " (a labels file? use idx_labels)" : ""));
  return detail::idx_dataset<float>(path, "idx_images", h, shape{h.extents[1], h.extents[2], 1}, 1.0 / 255.0);
}

/// An IDX file of unsigned-byte labels (n): std::int32_t elements of shape ().
inline dataset<tensor<std::int32_t>> idx_labels(const std::string& path) {
  input_file in(path, "idx_labels");
  const idx_header h = detail::read_idx_header(in);
  if (h.type != 0x08 || h.extents.size() != 1)
    detail::file_fail("idx_labels", path,
                      "expected labels: 1 dimension of unsigned bytes (magic 00 00 08 01), the file has " +
                          std::to_string(h.extents.size()) + " dimension(s) " + to_string(shape(h.extents)) + " of " +
                          detail::idx_type_name(h.type) + (h.extents.size() == 3 ? " (an images file? use idx_images)" : ""));
  return detail::idx_dataset<std::int32_t>(path, "idx_labels", h, shape{}, 1.0);
}

}  // namespace fluxion::data
