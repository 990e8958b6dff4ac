// Case-insensitive Levenshtein distance over short words, for config error suggestions.
#include "lib/config/did_you_mean.hh"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace ferry::config {
namespace {

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      std::size_t substitute = diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string_view> closest_match(std::string_view word,
                                              std::span<const std::string_view> candidates) {
  // Anything much longer than every key is not a typo of one; this also bounds the work.
  constexpr std::size_t kLongestWorthComparing = 64;
  if (word.size() > kLongestWorthComparing) return std::nullopt;
  std::optional<std::string_view> best;
  std::size_t best_distance = 0;
  for (std::string_view candidate : candidates) {
    std::size_t limit = candidate.size() <= 4 ? 1 : 2;
    std::size_t d = edit_distance(word, candidate);
    // An abbreviation ("warn" for "warning") is a typo too, however many letters are missing.
    if (word.size() >= 3 && word.size() < candidate.size() &&
        edit_distance(word, candidate.substr(0, word.size())) == 0) {
      d = std::min(d, limit);
    }
    if (d <= limit && d < candidate.size() && (!best || d < best_distance)) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace ferry::config
