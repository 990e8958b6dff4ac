// "did you mean ...?" for misspelt config keys and values: the closest candidate by edit distance.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace ferry::config {

// The candidate closest to `word` (case-insensitive Levenshtein distance), if it is close enough to
// be a plausible typo: at most 1 edit for short candidates, 2 for longer ones, or an abbreviation
// of at least 3 letters.
std::optional<std::string_view> closest_match(std::string_view word,
                                              std::span<const std::string_view> candidates);

}  // namespace ferry::config
