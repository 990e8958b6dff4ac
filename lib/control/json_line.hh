// Parsing one untrusted line as JSON, bounded in nesting so that a line of brackets cannot
// exhaust the control thread's stack in nlohmann's recursive parser.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::control {

inline constexpr int kMaxJsonNestingDepth = 32;

// The parsed value, or nullopt with a one-line reason in `error` (invalid JSON, invalid UTF-8,
// nesting deeper than kMaxJsonNestingDepth). Never throws for bad input.
std::optional<nlohmann::json> parse_json_line(std::string_view line, std::string& error);

}  // namespace ferry::control
