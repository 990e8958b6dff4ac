// Parsing one untrusted line as JSON, bounded in nesting depth.
#include "lib/control/json_line.hh"

#include <fmt/format.h>

namespace ferry::control {
namespace {

// Brackets inside strings do not count; unbalanced input is left for the parser to reject.
bool nesting_within_limit(std::string_view line) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : line) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > kMaxJsonNestingDepth) return false;
        break;
      case ']':
      case '}':
        --depth;
        break;
      default:
        break;
    }
  }
  return true;
}

// "[json.exception.parse_error.101] parse error at ..." -> "parse error at ..."
std::string without_exception_tag(const char* what) {
  std::string_view text(what);
  if (!text.empty() && text.front() == '[') {
    auto end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return std::string(text);
}

}  // namespace

std::optional<nlohmann::json> parse_json_line(std::string_view line, std::string& error) {
  if (!nesting_within_limit(line)) {
    error = fmt::format("JSON nests deeper than {} levels", kMaxJsonNestingDepth);
    return std::nullopt;
  }
  try {
    return nlohmann::json::parse(line.begin(), line.end());
  } catch (const nlohmann::json::exception& e) {
    // Covers syntax errors, invalid UTF-8 (parse_error.101) and numbers beyond a double (406).
    error = "invalid JSON: " + without_exception_tag(e.what());
    return std::nullopt;
  }
}

}  // namespace ferry::control
