// CSV files with a header row, as datasets of float rows.
//
//   // x1,x2,label
//   // 0.5,1.5,1
//   auto rows = fx::data::csv("points.csv");                      // (3,) float per row: every column
//   auto xs = fx::data::csv("points.csv", {"x1", "x2"});          // (2,) float per row, in that order
//   auto pairs = xs.zip(fx::data::csv("points.csv", {"label"}));
//
// The first line names the columns; each later line is one element: the selected columns, parsed
// as float, in the order they were asked for. Fields are separated by commas; spaces around a
// field and a final '\r' are ignored; empty lines are skipped; a header name may be in double
// quotes. Plain files and .gz files (with fluxion::zlib) are read, streaming. A row with another
// number of fields than the header, or a field that is not a number, throws fluxion::io_error
// naming the file, the line (counted from 1, the header being line 1) and the column.
#pragma once

#include <charconv>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "dataset.hpp"
#include "input_file.hpp"

namespace fluxion::data {
namespace detail {

/// Lines of an input_file, '\n'-separated, a final '\r' removed.
class line_reader {
 public:
  line_reader(const std::string& path, const std::string& op) : m_in(path, op) {}
  std::optional<std::string> next() {
    std::string line;
    for (;;) {
      if (m_pos == m_end) {
        m_end = m_in.read(m_buffer, sizeof m_buffer);
        m_pos = 0;
        if (m_end == 0) {
          if (line.empty()) return std::nullopt;
          break;  // a last line without '\n'
        }
      }
      const char* start = m_buffer + m_pos;
      const void* nl = std::memchr(start, '\n', m_end - m_pos);
      if (nl) {
        const std::size_t n = static_cast<const char*>(nl) - start;
        line.append(start, n);
        m_pos += n + 1;
        break;
      }
      line.append(start, m_end - m_pos);
      m_pos = m_end;
    }
    ++m_line;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
  }
  /// The number of the line next() returned last, from 1.
  std::size_t line_number() const noexcept { return m_line; }
  const std::string& path() const noexcept { return m_in.path(); }

 private:
  input_file m_in;
  char m_buffer[1 << 16];
  std::size_t m_pos = 0, m_end = 0, m_line = 0;
};

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

inline std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

inline bool blank(std::string_view line) { return trim(line).empty(); }

/// The header's column names, and the indices of the selected ones.
struct csv_layout {
  std::vector<std::string> names;
  std::vector<std::size_t> selected;
};

inline csv_layout read_csv_header(line_reader& lines, const std::vector<std::string>& columns) {
  std::optional<std::string> header;
  while ((header = lines.next()) && blank(*header)) {
  }
  if (!header) file_fail("csv", lines.path(), "the file is empty; expected a header row naming the columns");
  csv_layout layout;
  for (std::string_view f : split_fields(*header)) {
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"') f = f.substr(1, f.size() - 2);
    layout.names.emplace_back(f);
  }
  if (columns.empty()) {
    for (std::size_t i = 0; i < layout.names.size(); ++i) layout.selected.push_back(i);
  } else {
    for (const auto& c : columns) {
      std::size_t i = 0;
      while (i < layout.names.size() && layout.names[i] != c) ++i;
      if (i == layout.names.size()) {
        std::string have;
        for (const auto& n : layout.names) have += (have.empty() ? "'" : ", '") + n + "'";
        file_fail("csv", lines.path(), "no column named '" + c + "' in the header (line " +
                                           std::to_string(lines.line_number()) + "); the columns are " + have);
      }
      layout.selected.push_back(i);
    }
  }
  return layout;
}

}  // namespace detail

/// The rows of a CSV file with a header: the `columns` named (all when empty), as float tensors.
inline dataset<tensor<float>> csv(const std::string& path, std::vector<std::string> columns = {}) {
  {
    detail::line_reader lines(path, "csv");
    detail::read_csv_header(lines, columns);  // errors about the header now, not at iteration
  }
  return dataset<tensor<float>>([path, columns]() -> dataset<tensor<float>>::next_fn {
    auto lines = std::make_shared<detail::line_reader>(path, "csv");
    auto layout = std::make_shared<const detail::csv_layout>(detail::read_csv_header(*lines, columns));
    return [lines, layout]() -> std::optional<tensor<float>> {
      std::optional<std::string> line;
      while ((line = lines->next()) && detail::blank(*line)) {
      }
      if (!line) return std::nullopt;
      const auto fields = detail::split_fields(*line);
      const std::size_t line_no = lines->line_number();
      if (fields.size() != layout->names.size())
        detail::file_fail("csv", lines->path(),
                          "line " + std::to_string(line_no) + " has " + std::to_string(fields.size()) +
                              " fields, the header has " + std::to_string(layout->names.size()) + " columns");
      tensor<float> row(shape{static_cast<index_t>(layout->selected.size())});
      for (std::size_t k = 0; k < layout->selected.size(); ++k) {
        const std::size_t c = layout->selected[k];
        std::string_view f = fields[c];
        if (!f.empty() && f.front() == '+') f.remove_prefix(1);
        float v = 0;
        const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
        if (f.empty() || ec != std::errc() || end != f.data() + f.size())
          detail::file_fail("csv", lines->path(),
                            "line " + std::to_string(line_no) + ", column " + std::to_string(c + 1) + " ('" +
                                layout->names[c] + "'): expected a number, got '" + std::string(fields[c]) + "'");
        row.mutable_data()[k] = v;
      }
      return row;
    };
  });
}

}  // namespace fluxion::data
