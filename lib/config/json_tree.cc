// Recursive-descent JSON-with-comments parser producing a JsonValue tree with source positions.
// Every path is bounded (depth, size) and reports the first bad character; it is fuzzed.
#include "lib/config/json_tree.hh"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <unordered_map>

#include "lib/config/config.hh"

namespace ferry::config {

const JsonMember* JsonValue::find_member(std::string_view key) const {
  for (const auto& m : members) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  const JsonMember* m = find_member(key);
  return m ? &m->value : nullptr;
}

std::string_view kind_name(JsonValue::Kind kind) {
  switch (kind) {
    case JsonValue::Kind::null:
      return "null";
    case JsonValue::Kind::boolean:
      return "a boolean";
    case JsonValue::Kind::number:
      return "a number";
    case JsonValue::Kind::string:
      return "a string";
    case JsonValue::Kind::array:
      return "an array";
    case JsonValue::Kind::object:
      return "an object";
  }
  return "?";
}

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Length of the well-formed UTF-8 sequence at the start of `s` (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or 0 when it is not one.
std::size_t utf8_sequence_length(std::string_view s) {
  auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  auto cont = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xbf) {
    return i < s.size() && byte(i) >= lo && byte(i) <= hi;
  };
  unsigned b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    unsigned lo = b0 == 0xe0 ? 0xa0 : 0x80;
    unsigned hi = b0 == 0xed ? 0x9f : 0xbf;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    unsigned lo = b0 == 0xf0 ? 0x90 : 0x80;
    unsigned hi = b0 == 0xf4 ? 0x8f : 0xbf;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

class Parser {
 public:
  Parser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  JsonValue parse_document() {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // a UTF-8 byte order mark is harmless
    JsonValue root = parse_value(0);
    skip_blanks();
    if (!at_end()) fail(here(), fmt::format("unexpected {} after the top-level value", describe()));
    return root;
  }

 private:
  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(std::size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  SourcePosition here() const { return {line_, column_}; }

  void advance() {
    unsigned char c = static_cast<unsigned char>(text_[pos_++]);
    if (c == '\n') {
      ++line_;
      column_ = 1;
    } else if ((c & 0xc0) != 0x80) {  // continuation bytes belong to the previous column
      ++column_;
    }
  }

  [[noreturn]] void fail(SourcePosition at, std::string message) const {
    throw ConfigError(name_, at.line, at.column, std::move(message));
  }

  // The character at the cursor, as an operator would want to read it in a message.
  std::string describe() const {
    if (at_end()) return "end of input";
    unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\'') return "single quote (JSON strings use double quotes)";
    if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
    if (c == '\t') return "tab";
    if (c == '\n' || c == '\r') return "line break";
    return fmt::format("byte 0x{:02x}", c);
  }

  void skip_blanks() {
    while (!at_end()) {
      char c = peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else if (c == '/' && peek(1) == '/') {
        while (!at_end() && peek() != '\n') advance();
      } else if (c == '/' && peek(1) == '*') {
        SourcePosition start = here();
        advance();
        advance();
        while (!(peek() == '*' && peek(1) == '/')) {
          if (at_end()) fail(start, "unterminated /* comment");
          advance();
        }
        advance();
        advance();
      } else if (c == '/') {
        fail(here(), "unexpected '/'; comments are written // ... or /* ... */");
      } else {
        return;
      }
    }
  }

  JsonValue parse_value(int depth) {
    skip_blanks();
    SourcePosition at = here();
    if (at_end()) fail(at, "unexpected end of input; expected a value");
    char c = peek();
    JsonValue v;
    v.position = at;
    if (c == '{') return parse_object(std::move(v), depth + 1);
    if (c == '[') return parse_array(std::move(v), depth + 1);
    if (c == '"') {
      v.kind = JsonValue::Kind::string;
      v.text = parse_string();
      return v;
    }
    if (c == '-' || is_digit(c)) return parse_number(std::move(v));
    if (is_word(c)) return parse_literal(std::move(v));
    fail(at, fmt::format("unexpected {}; expected a value", describe()));
  }

  JsonValue parse_literal(JsonValue v) {
    std::size_t start = pos_;
    while (!at_end() && is_word(peek()) && pos_ - start < 32) advance();
    std::string_view word = text_.substr(start, pos_ - start);
    if (word == "true" || word == "false") {
      v.kind = JsonValue::Kind::boolean;
      v.boolean = word == "true";
    } else if (word == "null") {
      v.kind = JsonValue::Kind::null;
    } else if (word == "NaN" || word == "Infinity") {
      fail(v.position, "NaN and Infinity are not JSON numbers");
    } else {
      fail(v.position,
           fmt::format("unexpected '{}'; expected a value (strings need double quotes)", word));
    }
    return v;
  }

  void check_depth(const JsonValue& v, int depth) const {
    if (depth > kMaxJsonDepth) {
      fail(v.position, fmt::format("nesting is deeper than {} levels", kMaxJsonDepth));
    }
  }

  JsonValue parse_array(JsonValue v, int depth) {
    check_depth(v, depth);
    v.kind = JsonValue::Kind::array;
    advance();  // '['
    skip_blanks();
    if (peek() == ']') {
      advance();
      return v;
    }
    for (;;) {
      v.items.push_back(parse_value(depth));
      skip_blanks();
      if (peek() == ']') {
        advance();
        return v;
      }
      if (peek() != ',') {
        if (at_end()) {
          fail(here(), fmt::format("unexpected end of input in the array opened at {}:{}",
                                   v.position.line, v.position.column));
        }
        fail(here(), fmt::format("unexpected {}; expected ',' or ']'", describe()));
      }
      SourcePosition comma = here();
      advance();
      skip_blanks();
      if (peek() == ']') fail(comma, "trailing comma before ']'");
    }
  }

  JsonValue parse_object(JsonValue v, int depth) {
    check_depth(v, depth);
    v.kind = JsonValue::Kind::object;
    advance();  // '{'
    skip_blanks();
    if (peek() == '}') {
      advance();
      return v;
    }
    std::unordered_map<std::string, std::size_t> index;  // key -> member, for duplicates
    for (;;) {
      skip_blanks();
      SourcePosition key_at = here();
      if (peek() != '"') {
        if (at_end()) {
          fail(here(), fmt::format("unexpected end of input in the object opened at {}:{}",
                                   v.position.line, v.position.column));
        }
        if (is_word(peek())) fail(key_at, "object keys must be double-quoted strings");
        fail(key_at, fmt::format("unexpected {}; expected a \"key\"", describe()));
      }
      std::string key = parse_string();
      if (auto it = index.find(key); it != index.end()) {
        const SourcePosition& first = v.members[it->second].key_position;
        fail(key_at, fmt::format("duplicate key '{}' (first defined at {}:{})",
                                 v.members[it->second].key, first.line, first.column));
      }
      skip_blanks();
      if (peek() != ':') {
        fail(here(), fmt::format("unexpected {}; expected ':' after the key", describe()));
      }
      advance();
      JsonValue value = parse_value(depth);
      index.emplace(key, v.members.size());
      v.members.push_back(JsonMember{std::move(key), key_at, std::move(value)});
      skip_blanks();
      if (peek() == '}') {
        advance();
        return v;
      }
      if (peek() != ',') {
        if (at_end()) {
          fail(here(), fmt::format("unexpected end of input in the object opened at {}:{}",
                                   v.position.line, v.position.column));
        }
        fail(here(), fmt::format("unexpected {}; expected ',' or '}}'", describe()));
      }
      SourcePosition comma = here();
      advance();
      skip_blanks();
      if (peek() == '}') fail(comma, "trailing comma before '}'");
    }
  }

  // At the opening quote; returns the decoded text and leaves the cursor after the closing quote.
  std::string parse_string() {
    SourcePosition start = here();
    advance();  // '"'
    std::string out;
    for (;;) {
      if (at_end()) fail(start, "unterminated string");
      unsigned char c = static_cast<unsigned char>(peek());
      if (c == '"') {
        advance();
        return out;
      }
      if (c == '\\') {
        parse_escape(out);
      } else if (c == '\n' || c == '\r') {
        fail(start, "unterminated string (line break before the closing quote)");
      } else if (c < 0x20) {
        fail(here(), fmt::format("control character 0x{:02x} in a string; escape it", c));
      } else if (c < 0x80) {
        out += static_cast<char>(c);
        advance();
      } else {
        std::size_t n = utf8_sequence_length(text_.substr(pos_));
        if (n == 0) fail(here(), "invalid UTF-8 in a string");
        out.append(text_.substr(pos_, n));
        for (std::size_t i = 0; i < n; ++i) advance();
      }
    }
  }

  std::uint32_t parse_hex4() {
    SourcePosition at = here();
    std::uint32_t cp = 0;
    for (int i = 0; i < 4; ++i) {
      int h = hex_value(peek());
      if (at_end() || h < 0) fail(at, "\\u must be followed by four hex digits");
      cp = cp << 4 | static_cast<std::uint32_t>(h);
      advance();
    }
    return cp;
  }

  void parse_escape(std::string& out) {
    SourcePosition at = here();
    advance();  // '\'
    if (at_end()) fail(at, "unterminated string");
    char e = peek();
    advance();
    switch (e) {
      case '"':
        out += '"';
        return;
      case '\\':
        out += '\\';
        return;
      case '/':
        out += '/';
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        fail(at, "invalid escape; use one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
    }
    std::uint32_t cp = parse_hex4();
    if (cp >= 0xdc00 && cp <= 0xdfff) fail(at, "lone low surrogate in \\u escape");
    if (cp >= 0xd800 && cp <= 0xdbff) {
      if (peek() != '\\' || peek(1) != 'u')
        fail(at, "high surrogate not followed by \\uDC00-\\uDFFF");
      advance();
      advance();
      std::uint32_t low = parse_hex4();
      if (low < 0xdc00 || low > 0xdfff) fail(at, "high surrogate not followed by \\uDC00-\\uDFFF");
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    }
    if (cp == 0) fail(at, "NUL characters are not allowed in strings");
    append_utf8(out, cp);
  }

  void take_digits() {
    while (is_digit(peek())) advance();
  }

  JsonValue parse_number(JsonValue v) {
    v.kind = JsonValue::Kind::number;
    std::size_t start = pos_;
    bool fractional = false;
    if (peek() == '-') advance();
    if (!is_digit(peek())) fail(here(), "expected a digit after '-'");
    if (peek() == '0' && is_digit(peek(1))) {
      fail(v.position,
           "numbers must not have leading zeros (a file mode is a string, e.g. \"0660\")");
    }
    take_digits();
    if (peek() == '.') {
      fractional = true;
      advance();
      if (!is_digit(peek())) fail(here(), "expected a digit after '.'");
      take_digits();
    }
    if (peek() == 'e' || peek() == 'E') {
      fractional = true;
      advance();
      if (peek() == '+' || peek() == '-') advance();
      if (!is_digit(peek())) fail(here(), "expected a digit in the exponent");
      take_digits();
    }
    v.text = std::string(text_.substr(start, pos_ - start));
    const char* first = v.text.data();
    const char* last = first + v.text.size();
    if (!fractional) {
      std::int64_t n = 0;
      auto [end, ec] = std::from_chars(first, last, n);
      if (ec == std::errc{} && end == last) {
        v.integer = n;
        v.number = static_cast<double>(n);
        return v;
      }
    }
    auto [end, ec] = std::from_chars(first, last, v.number);
    if (ec != std::errc{} || end != last || !std::isfinite(v.number)) {
      fail(v.position, fmt::format("number {} is out of range", v.text));
    }
    // 1e3 and 10.0 are integers too; the bounds are exactly representable powers of two.
    if (std::trunc(v.number) == v.number && v.number >= -9223372036854775808.0 &&
        v.number < 9223372036854775808.0) {
      v.integer = static_cast<std::int64_t>(v.number);
    }
    return v;
  }
};

}  // namespace

JsonValue parse_json_with_comments(std::string_view text, const std::string& source_name) {
  if (text.size() > kMaxConfigBytes) {
    throw ConfigError(source_name, 0, 0,
                      fmt::format("file is {} bytes; a config may be at most {} bytes (1 MiB)",
                                  text.size(), kMaxConfigBytes));
  }
  return Parser(text, source_name).parse_document();
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace ferry::config
