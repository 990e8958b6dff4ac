// Aligned text tables for ferryctl: columns as wide as their widest cell, numbers right-aligned.
#include "lib/ctl/table.hh"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace ferry::ctl {
namespace {

bool right_aligned(const Column& column, std::size_t index,
                   const std::vector<std::vector<std::string>>& rows) {
  if (column.align != Align::automatic) return column.align == Align::right;
  bool any_number = false;
  for (const auto& row : rows) {
    const std::string& cell = row[index];
    if (cell.empty() || cell == "-") continue;
    if (!looks_numeric(cell)) return false;
    any_number = true;
  }
  return any_number;
}

}  // namespace

Table::Table(std::vector<Column> columns) : columns_(std::move(columns)) {}

Table::Table(std::initializer_list<std::string_view> headers) {
  for (std::string_view header : headers) columns_.push_back(Column{std::string(header)});
}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() > columns_.size()) {
    throw std::invalid_argument("table row has more cells than the table has columns");
  }
  cells.resize(columns_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  const std::size_t n = columns_.size();
  std::vector<std::size_t> width(n);
  std::vector<bool> right(n);
  for (std::size_t c = 0; c < n; ++c) {
    width[c] = display_width(columns_[c].header);
    for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
    right[c] = right_aligned(columns_[c], c, rows_);
  }

  std::string out;
  auto emit_line = [&](auto cell_at) {
    std::string line;
    for (std::size_t c = 0; c < n; ++c) {
      const std::string& cell = cell_at(c);
      std::size_t pad = width[c] - display_width(cell);
      if (c > 0) line += "  ";
      if (right[c]) line.append(pad, ' ');
      line += cell;
      if (!right[c]) line.append(pad, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  };
  emit_line([&](std::size_t c) -> const std::string& { return columns_[c].header; });
  for (const auto& row : rows_) {
    emit_line([&](std::size_t c) -> const std::string& { return row[c]; });
  }
  return out;
}

bool looks_numeric(std::string_view cell) {
  if (cell == "NaN" || cell == "+Inf" || cell == "-Inf") return true;
  std::size_t i = 0;
  auto digits = [&] {
    std::size_t start = i;
    while (i < cell.size() && std::isdigit(static_cast<unsigned char>(cell[i]))) ++i;
    return i - start;
  };
  if (i < cell.size() && (cell[i] == '-' || cell[i] == '+')) ++i;
  std::size_t mantissa = digits();
  if (i < cell.size() && cell[i] == '.') {
    ++i;
    mantissa += digits();
  }
  if (mantissa == 0) return false;
  if (i < cell.size() && (cell[i] == 'e' || cell[i] == 'E')) {
    ++i;
    if (i < cell.size() && (cell[i] == '-' || cell[i] == '+')) ++i;
    if (digits() == 0) return false;
  }
  return i == cell.size();
}

std::size_t display_width(std::string_view text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char ch) {
    return (static_cast<unsigned char>(ch) & 0xC0) != 0x80;  // skip UTF-8 continuation bytes
  }));
}

}  // namespace ferry::ctl
