// The JSON-with-comments parser: values and their positions, comments, and every syntax error
// reported at its exact line and column.
#include "lib/config/json_tree.hh"

#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"

namespace ferry::config {
namespace {

using Kind = JsonValue::Kind;

JsonValue parse(const std::string& text) {
  return parse_json_with_comments(text, "t.json");
}

// Parses `text`, which must fail, and returns the error.
ConfigError error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << text;
  return ConfigError("", -1, -1, "");
}

#define EXPECT_ERROR_AT(text, at_line, at_column, msg) \
  do {                                                 \
    ConfigError e = error_of(text);                    \
    EXPECT_EQ(e.file(), "t.json");                     \
    EXPECT_EQ(e.line(), at_line) << e.what();          \
    EXPECT_EQ(e.column(), at_column) << e.what();      \
    EXPECT_EQ(e.message(), msg) << e.what();           \
  } while (0)

TEST(JsonTree, KeepsThePositionOfEveryKeyAndValue) {
  JsonValue root = parse("{\n  \"a\": [1, \"x\", null],\n  \"b\": {\"c\": true}\n}");
  ASSERT_EQ(root.kind, Kind::object);
  EXPECT_EQ(root.position.line, 1);
  EXPECT_EQ(root.position.column, 1);
  ASSERT_EQ(root.members.size(), 2u);
  const JsonMember& a = root.members[0];
  EXPECT_EQ(a.key, "a");
  EXPECT_EQ(a.key_position.line, 2);
  EXPECT_EQ(a.key_position.column, 3);
  ASSERT_EQ(a.value.kind, Kind::array);
  EXPECT_EQ(a.value.position.column, 8);
  ASSERT_EQ(a.value.items.size(), 3u);
  EXPECT_EQ(a.value.items[0].integer, 1);
  EXPECT_EQ(a.value.items[1].text, "x");
  EXPECT_EQ(a.value.items[1].position.line, 2);
  EXPECT_EQ(a.value.items[1].position.column, 12);
  EXPECT_EQ(a.value.items[2].kind, Kind::null);
  const JsonValue* c = root.find("b")->find("c");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->kind, Kind::boolean);
  EXPECT_TRUE(c->boolean);
  EXPECT_EQ(c->position.line, 3);
  EXPECT_EQ(c->position.column, 14);
  EXPECT_EQ(root.find("missing"), nullptr);
}

TEST(JsonTree, AcceptsLineAndBlockComments) {
  JsonValue root =
      parse("// head\n{ /* a */ \"a\": 1, // tail\n /* multi\nline */ \"b\": 2 }  // end");
  ASSERT_EQ(root.members.size(), 2u);
  EXPECT_EQ(root.members[1].key, "b");
  EXPECT_EQ(root.members[1].key_position.line, 4);
  EXPECT_EQ(root.members[1].key_position.column, 9);
  EXPECT_EQ(root.members[1].value.integer, 2);
}

TEST(JsonTree, CommentMarkersInsideStringsAreText) {
  JsonValue root = parse(R"({"a": "http://x/*y*/"})");
  EXPECT_EQ(root.find("a")->text, "http://x/*y*/");
}

TEST(JsonTree, CountsColumnsInCharactersNotBytes) {
  JsonValue root = parse("{\"\xc3\xa9\": 1, \"k\": 2}");
  EXPECT_EQ(root.members[0].key, "\xc3\xa9");
  EXPECT_EQ(root.members[1].key_position.column, 10);
}

TEST(JsonTree, SkipsAByteOrderMark) {
  JsonValue root = parse("\xEF\xBB\xBF{\"a\": 1}");
  EXPECT_EQ(root.position.column, 1);
  EXPECT_EQ(root.find("a")->integer, 1);
}

TEST(JsonTree, ParsesIntegersAndMarksNonIntegers) {
  JsonValue v = parse("[9223372036854775807, -5, 1e3, 1.5, 99999999999999999999, -0]");
  ASSERT_EQ(v.items.size(), 6u);
  EXPECT_EQ(v.items[0].integer, INT64_MAX);
  EXPECT_EQ(v.items[1].integer, -5);
  EXPECT_EQ(v.items[2].integer, 1000);
  EXPECT_EQ(v.items[2].text, "1e3");
  EXPECT_FALSE(v.items[3].integer);
  EXPECT_DOUBLE_EQ(v.items[3].number, 1.5);
  EXPECT_FALSE(v.items[4].integer);  // integral but beyond 64 bits
  EXPECT_EQ(v.items[5].integer, 0);
}

TEST(JsonTree, DecodesEscapesAndSurrogatePairs) {
  JsonValue v = parse(R"(["\u00e9\ud83d\ude00\n\t\"\\\/"])");
  EXPECT_EQ(v.items[0].text, "\xc3\xa9\xf0\x9f\x98\x80\n\t\"\\/");
}

TEST(JsonTree, PassesUtf8Through) {
  JsonValue v = parse("[\"gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80\"]");
  EXPECT_EQ(v.items[0].text, "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80");
}

TEST(JsonTree, RejectsTrailingCommasAtTheComma) {
  EXPECT_ERROR_AT(R"({"a": [1, 2,]})", 1, 12, "trailing comma before ']'");
  EXPECT_ERROR_AT("{\"a\": 1,\n}", 1, 8, "trailing comma before '}'");
}

TEST(JsonTree, RejectsDuplicateKeysAtTheSecondKey) {
  EXPECT_ERROR_AT("{\"a\": 1,\n \"a\": 2}", 2, 2, "duplicate key 'a' (first defined at 1:2)");
}

TEST(JsonTree, SameKeyInDifferentObjectsIsFine) {
  JsonValue v = parse(R"({"a": {"a": 1}, "b": {"a": 2}})");
  EXPECT_EQ(v.find("b")->find("a")->integer, 2);
}

TEST(JsonTree, RejectsUnterminatedThingsWhereTheyStart) {
  EXPECT_ERROR_AT(R"({"a": "abc)", 1, 7, "unterminated string");
  EXPECT_ERROR_AT("{\"a\": \"abc\n\"}", 1, 7,
                  "unterminated string (line break before the closing quote)");
  EXPECT_ERROR_AT("{} /* x", 1, 4, "unterminated /* comment");
  EXPECT_ERROR_AT("{\"a\": [1,\n2", 2, 2, "unexpected end of input in the array opened at 1:7");
  EXPECT_ERROR_AT("{\"a\": 1", 1, 8, "unexpected end of input in the object opened at 1:1");
  EXPECT_ERROR_AT("", 1, 1, "unexpected end of input; expected a value");
  EXPECT_ERROR_AT("  // only a comment\n", 2, 1, "unexpected end of input; expected a value");
}

TEST(JsonTree, RejectsNestingDeeperThanTheLimit) {
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_NO_THROW(parse(ok));
  std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_ERROR_AT(deep, 1, kMaxJsonDepth + 1, "nesting is deeper than 64 levels");
  // Far deeper input stops at the limit too, instead of recursing to a stack overflow.
  EXPECT_ERROR_AT(std::string(100000, '['), 1, kMaxJsonDepth + 1,
                  "nesting is deeper than 64 levels");
  EXPECT_ERROR_AT(std::string(100000, '{'), 1, 2, "unexpected '{'; expected a \"key\"");
}

TEST(JsonTree, RejectsNumbersJsonDoesNotAllow) {
  EXPECT_ERROR_AT(R"({"mode": 0660})", 1, 10,
                  "numbers must not have leading zeros (a file mode is a string, e.g. \"0660\")");
  EXPECT_ERROR_AT(R"({"a": NaN})", 1, 7, "NaN and Infinity are not JSON numbers");
  EXPECT_ERROR_AT(R"([Infinity])", 1, 2, "NaN and Infinity are not JSON numbers");
  EXPECT_ERROR_AT(R"([-Infinity])", 1, 3, "expected a digit after '-'");
  EXPECT_ERROR_AT(R"([1e999])", 1, 2, "number 1e999 is out of range");
  EXPECT_ERROR_AT(R"([1.])", 1, 4, "expected a digit after '.'");
  EXPECT_ERROR_AT(R"([1e+])", 1, 5, "expected a digit in the exponent");
  EXPECT_ERROR_AT(R"([+1])", 1, 2, "unexpected '+'; expected a value");
  EXPECT_ERROR_AT(R"([.5])", 1, 2, "unexpected '.'; expected a value");
}

TEST(JsonTree, RejectsBadStrings) {
  EXPECT_ERROR_AT(R"(["\ud800"])", 1, 3, "high surrogate not followed by \\uDC00-\\uDFFF");
  EXPECT_ERROR_AT(R"(["\udc00"])", 1, 3, "lone low surrogate in \\u escape");
  EXPECT_ERROR_AT(R"(["\u12"])", 1, 5, "\\u must be followed by four hex digits");
  EXPECT_ERROR_AT(R"(["\u0000"])", 1, 3, "NUL characters are not allowed in strings");
  EXPECT_ERROR_AT(R"(["\x"])", 1, 3,
                  "invalid escape; use one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX");
  EXPECT_ERROR_AT("[\"a\xff\"]", 1, 4, "invalid UTF-8 in a string");
  EXPECT_ERROR_AT("[\"a\xc0\xaf\"]", 1, 4, "invalid UTF-8 in a string");      // overlong '/'
  EXPECT_ERROR_AT("[\"a\xed\xa0\x80\"]", 1, 4, "invalid UTF-8 in a string");  // surrogate
  EXPECT_ERROR_AT("[\"a\xe2\x82\"]", 1, 4, "invalid UTF-8 in a string");      // truncated
  EXPECT_ERROR_AT("[\"a\tb\"]", 1, 4, "control character 0x09 in a string; escape it");
}

TEST(JsonTree, RejectsStrayCharacters) {
  EXPECT_ERROR_AT("{} x", 1, 4, "unexpected 'x' after the top-level value");
  EXPECT_ERROR_AT("{a: 1}", 1, 2, "object keys must be double-quoted strings");
  EXPECT_ERROR_AT("{'a': 1}", 1, 2,
                  "unexpected single quote (JSON strings use double quotes); expected a \"key\"");
  EXPECT_ERROR_AT(R"({"a": 1 "b": 2})", 1, 9, "unexpected '\"'; expected ',' or '}'");
  EXPECT_ERROR_AT(R"({"a" 1})", 1, 6, "unexpected '1'; expected ':' after the key");
  EXPECT_ERROR_AT(R"({"a": tru})", 1, 7,
                  "unexpected 'tru'; expected a value (strings need double quotes)");
  EXPECT_ERROR_AT("[1 / 2]", 1, 4, "unexpected '/'; comments are written // ... or /* ... */");
  EXPECT_ERROR_AT("[\x01]", 1, 2, "unexpected byte 0x01; expected a value");
}

TEST(JsonTree, RejectsInputLargerThanOneMebibyte) {
  std::string big = "[" + std::string(kMaxConfigBytes, ' ') + "]";
  ConfigError e = error_of(big);
  EXPECT_EQ(e.line(), 0);
  EXPECT_EQ(e.message(), "file is 1048578 bytes; a config may be at most 1048576 bytes (1 MiB)");
  std::string fits = "[" + std::string(kMaxConfigBytes - 2, ' ') + "]";
  EXPECT_NO_THROW(parse(fits));
}

}  // namespace
}  // namespace ferry::config
