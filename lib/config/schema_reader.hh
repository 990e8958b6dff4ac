// What every section of the config validator reads with: typed readers of JSON values that fail
// at the value's own FILE:LINE:COL, and ObjectReader, which refuses unknown keys (did you mean?).
// validate.cc reads the daemon-wide sections with them, validate_service.cc the services.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"
#include "lib/config/did_you_mean.hh"
#include "lib/config/json_tree.hh"

namespace ferry::config::schema {

using Kind = JsonValue::Kind;

// Operator text inside a message: control characters escaped, long text cut at a character
// boundary, so a message is one readable line whatever the file holds.
std::string printable(std::string_view s);
std::string in_quotes(std::string_view s);
// A value as an error message names it: null, 3, the string 'x', an array, ...
std::string describe(const JsonValue& v);
std::string join(std::span<const std::string_view> words);
std::string position_text(SourcePosition p);
// Key paths as messages print them: services[1].backends[0].weight
std::string child(const std::string& path, std::string_view key);
std::string element(const std::string& path, std::size_t index);
bool is_power_of_two(std::int64_t n);
// 0.0.0.0 or ::, which no vip or outer source may be.
bool is_unspecified(const net::IpAddress& a);
std::string_view protocol_name(bool tcp);

class SchemaReader {
 public:
  explicit SchemaReader(const std::string& source_name) : source_name_(source_name) {}

  // Throws ConfigError "FILE:LINE:COL: PATH: message" (no "PATH: " when path is empty).
  [[noreturn]] void fail(SourcePosition at, const std::string& path, std::string message) const {
    throw ConfigError(source_name_, at.line, at.column,
                      path.empty() ? std::move(message) : fmt::format("{}: {}", path, message));
  }

  void expect(const JsonValue& v, const std::string& path, Kind kind, std::string_view what) const;
  const std::string& read_string(const JsonValue& v, const std::string& path,
                                 std::string_view what = "a string") const;
  std::int64_t read_integer(const JsonValue& v, const std::string& path, std::int64_t lo,
                            std::int64_t hi) const;
  std::uint32_t read_u32(const JsonValue& v, const std::string& path, std::int64_t lo,
                         std::int64_t hi) const {
    return static_cast<std::uint32_t>(read_integer(v, path, lo, hi));
  }
  std::uint32_t read_power_of_two(const JsonValue& v, const std::string& path, std::int64_t lo,
                                  std::int64_t hi) const;

  template <typename E>
  E read_choice(const JsonValue& v, const std::string& path,
                std::initializer_list<std::pair<std::string_view, E>> choices) const {
    std::vector<std::string_view> names;
    for (const auto& [name, value] : choices) names.push_back(name);
    expect(v, path, Kind::string, fmt::format("a string, one of {}", join(names)));
    for (const auto& [name, value] : choices) {
      if (v.text == name) return value;
    }
    std::string message = fmt::format("{} is not one of {}", in_quotes(v.text), join(names));
    if (auto guess = closest_match(v.text, names)) {
      message += fmt::format(" (did you mean '{}'?)", *guess);
    }
    fail(v.position, path, std::move(message));
  }

  std::string read_absolute_path(const JsonValue& v, const std::string& path) const;
  net::Endpoint read_endpoint(const JsonValue& v, const std::string& path) const;
  std::optional<net::Endpoint> read_optional_endpoint(const JsonValue& v,
                                                      const std::string& path) const;
  net::IpAddress read_address(const JsonValue& v, const std::string& path) const;
  net::Prefix read_prefix(const JsonValue& v, const std::string& path) const;
  Protocols read_protocols(const JsonValue& v, const std::string& path) const;

 private:
  const std::string& source_name_;
};

// One JSON object of the schema: checks its type and that every key is one it accepts.
class ObjectReader {
 public:
  ObjectReader(const SchemaReader& reader, const JsonValue& value, std::string path,
               std::initializer_list<std::string_view> keys);

  const JsonValue* get(std::string_view key) const { return value_.find(key); }
  const JsonValue& require(std::string_view key) const;
  std::string path_of(std::string_view key) const { return child(path_, key); }
  const std::string& path() const { return path_; }
  const JsonValue& value() const { return value_; }

 private:
  const SchemaReader& reader_;
  const JsonValue& value_;
  std::string path_;
};

}  // namespace ferry::config::schema
