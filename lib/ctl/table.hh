// Aligned text tables for ferryctl: columns as wide as their widest cell, numbers right-aligned.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::ctl {

// automatic: right-aligned when every non-empty, non-"-" cell of the column looks numeric.
enum class Align { automatic, left, right };

struct Column {
  std::string header;
  Align align = Align::automatic;
};

class Table {
 public:
  explicit Table(std::vector<Column> columns);
  Table(std::initializer_list<std::string_view> headers);

  // Short rows are padded with empty cells; extra cells are an error (std::invalid_argument).
  void add_row(std::vector<std::string> cells);
  bool empty() const { return rows_.empty(); }
  std::size_t size() const { return rows_.size(); }

  // Header line then one line per row, cells separated by two spaces, no trailing blanks.
  std::string render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// A decimal number as format_number() writes it: "12", "-3.5", "1e+20", "NaN", "+Inf".
bool looks_numeric(std::string_view cell);

// Columns a terminal gives the text: UTF-8 code points (labels may carry non-ASCII).
std::size_t display_width(std::string_view text);

}  // namespace ferry::ctl
