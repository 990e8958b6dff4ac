// What the config tests ask of a rejected config: its ConfigError, and where a token sits on a
// line, so an expected line:col is computed from the text rather than counted by hand.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"

namespace ferry::config::test {

// The error parse_config throws for `text` (read as "f.json"); a test failure if there is none.
inline ConfigError error_of(const std::string& text) {
  try {
    parse_config(text, "f.json");
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for: " << text;
  return ConfigError("", -1, -1, "");
}

#define EXPECT_ERROR_AT(text, at_line, at_column, msg) \
  do {                                                 \
    ConfigError e = error_of(text);                    \
    EXPECT_EQ(e.line(), at_line) << e.what();          \
    EXPECT_EQ(e.column(), at_column) << e.what();      \
    EXPECT_EQ(e.message(), msg) << e.what();           \
  } while (0)

// Column of the first `needle` in single-line `text`: where an error about that token must point.
inline int column_of(const std::string& text, const std::string& needle) {
  auto at = text.find(needle);
  EXPECT_NE(at, std::string::npos) << needle << " not in " << text;
  return static_cast<int>(at) + 1;
}

}  // namespace ferry::config::test
