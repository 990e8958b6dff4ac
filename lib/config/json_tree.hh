// A strict JSON-with-comments parser that keeps the line and column of every key and value,
// so the config validator can point at the exact place an operator has to fix.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::config {

// 1-based; column counts UTF-8 code points, a tab is one column.
struct SourcePosition {
  int line = 1;
  int column = 1;
};

// Larger files are refused before parsing: a config is a few kilobytes, and the parser is fuzzed.
inline constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;
// Arrays and objects nested deeper than this are refused, which bounds the parser's recursion.
inline constexpr int kMaxJsonDepth = 64;

struct JsonMember;

struct JsonValue {
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind = Kind::null;
  SourcePosition position;  // first character of the value ('{' for an object)
  bool boolean = false;
  // string: the decoded text (valid UTF-8); number: the literal as written.
  std::string text;
  // number: its value, and the same as an integer when it is integral and fits in 64 bits.
  double number = 0;
  std::optional<std::int64_t> integer;
  std::vector<JsonValue> items;     // array
  std::vector<JsonMember> members;  // object, in file order, keys unique

  const JsonValue* find(std::string_view key) const;
  const JsonMember* find_member(std::string_view key) const;
};

struct JsonMember {
  std::string key;
  SourcePosition key_position;  // the opening quote of the key
  JsonValue value;
};

// "object", "array", "string", ... for error messages.
std::string_view kind_name(JsonValue::Kind kind);

// The value of a hex digit (0-9, a-f, A-F), -1 for any other character.
int hex_value(char c);

// Parses one JSON value (with // and /* */ comments) filling all of `text`.
// Throws ConfigError naming `source_name`, with the position of the first offending character.
// Rejects: trailing commas, duplicate keys in one object, invalid UTF-8, lone surrogates, control
// characters in strings, NaN/Infinity and numbers beyond double range, nesting deeper than
// kMaxJsonDepth, input larger than kMaxConfigBytes.
JsonValue parse_json_with_comments(std::string_view text, const std::string& source_name);

}  // namespace ferry::config
