// Typed readers of config values and the key check of schema objects (see schema_reader.hh).
#include "lib/config/schema_reader.hh"

#include <cmath>

namespace ferry::config::schema {

std::string printable(std::string_view s) {
  constexpr std::size_t kMaxShownBytes = 80;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (i >= kMaxShownBytes && (c & 0xc0) != 0x80) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string in_quotes(std::string_view s) {
  return "'" + printable(s) + "'";
}

std::string describe(const JsonValue& v) {
  switch (v.kind) {
    case Kind::null:
      return "null";
    case Kind::boolean:
      return v.boolean ? "true" : "false";
    case Kind::number:
      return printable(v.text);
    case Kind::string:
      return "the string " + in_quotes(v.text);
    case Kind::array:
      return "an array";
    case Kind::object:
      return "an object";
  }
  return "?";
}

std::string join(std::span<const std::string_view> words) {
  std::string out;
  for (std::string_view w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

bool is_unspecified(const net::IpAddress& a) {
  for (auto b : a.bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string position_text(SourcePosition p) {
  return fmt::format("{}:{}", p.line, p.column);
}

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string element(const std::string& path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}

bool is_power_of_two(std::int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

std::string_view protocol_name(bool tcp) {
  return tcp ? "tcp" : "udp";
}

void SchemaReader::expect(const JsonValue& v, const std::string& path, Kind kind,
                          std::string_view what) const {
  if (v.kind != kind) fail(v.position, path, fmt::format("expected {}, got {}", what, describe(v)));
}

const std::string& SchemaReader::read_string(const JsonValue& v, const std::string& path,
                                             std::string_view what) const {
  expect(v, path, Kind::string, what);
  return v.text;
}

std::int64_t SchemaReader::read_integer(const JsonValue& v, const std::string& path,
                                        std::int64_t lo, std::int64_t hi) const {
  if (v.kind != Kind::number) {
    fail(v.position, path,
         fmt::format("expected an integer ({}..{}), got {}", lo, hi, describe(v)));
  }
  if (!v.integer && std::trunc(v.number) != v.number) {
    fail(v.position, path, fmt::format("{} is not an integer", printable(v.text)));
  }
  if (!v.integer || *v.integer < lo || *v.integer > hi) {
    fail(v.position, path, fmt::format("{} is out of range ({}..{})", printable(v.text), lo, hi));
  }
  return *v.integer;
}

std::uint32_t SchemaReader::read_power_of_two(const JsonValue& v, const std::string& path,
                                              std::int64_t lo, std::int64_t hi) const {
  std::int64_t n = read_integer(v, path, lo, hi);
  if (!is_power_of_two(n)) {
    fail(v.position, path, fmt::format("{} is not a power of two", printable(v.text)));
  }
  return static_cast<std::uint32_t>(n);
}

std::string SchemaReader::read_absolute_path(const JsonValue& v, const std::string& path) const {
  const std::string& text = read_string(v, path, "a string (an absolute path)");
  if (text.empty() || text.front() != '/') {
    fail(v.position, path, fmt::format("{} is not an absolute path", in_quotes(text)));
  }
  return text;
}

net::Endpoint SchemaReader::read_endpoint(const JsonValue& v, const std::string& path) const {
  const std::string& text = read_string(v, path, "a string \"ADDRESS:PORT\"");
  auto e = net::Endpoint::parse(text);
  if (!e) {
    fail(v.position, path,
         fmt::format("{} is not ADDRESS:PORT (e.g. \"127.0.0.1:9469\" or \"[::1]:9469\")",
                     in_quotes(text)));
  }
  return *e;
}

std::optional<net::Endpoint> SchemaReader::read_optional_endpoint(const JsonValue& v,
                                                                  const std::string& path) const {
  if (v.kind == Kind::null) return std::nullopt;
  expect(v, path, Kind::string, "a string \"ADDRESS:PORT\" or null");
  return read_endpoint(v, path);
}

net::IpAddress SchemaReader::read_address(const JsonValue& v, const std::string& path) const {
  const std::string& text = read_string(v, path, "a string (an IPv4 or IPv6 address)");
  auto a = net::IpAddress::parse(text);
  if (!a) {
    fail(v.position, path, fmt::format("{} is not an IPv4 or IPv6 address", in_quotes(text)));
  }
  return *a;
}

net::Prefix SchemaReader::read_prefix(const JsonValue& v, const std::string& path) const {
  const std::string& text =
      read_string(v, path, "a string (a CIDR prefix such as \"192.0.2.0/24\")");
  std::string why;
  auto p = net::Prefix::parse(text, &why);
  if (!p) fail(v.position, path, fmt::format("{} is not a CIDR prefix: {}", in_quotes(text), why));
  return *p;
}

Protocols SchemaReader::read_protocols(const JsonValue& v, const std::string& path) const {
  expect(v, path, Kind::array, "an array of \"udp\" and/or \"tcp\"");
  if (v.items.empty()) fail(v.position, path, "must list at least one of \"udp\", \"tcp\"");
  Protocols p;
  for (std::size_t i = 0; i < v.items.size(); ++i) {
    const JsonValue& item = v.items[i];
    std::string item_path = element(path, i);
    bool tcp = read_choice<bool>(item, item_path, {{"udp", false}, {"tcp", true}});
    bool& seen = tcp ? p.tcp : p.udp;
    if (seen) fail(item.position, item_path, fmt::format("'{}' is listed twice", item.text));
    seen = true;
  }
  return p;
}

ObjectReader::ObjectReader(const SchemaReader& reader, const JsonValue& value, std::string path,
                           std::initializer_list<std::string_view> keys)
    : reader_(reader), value_(value), path_(std::move(path)) {
  if (value.kind != Kind::object) {
    reader_.fail(value.position, path_,
                 fmt::format("expected an object {{...}}, got {}", describe(value)));
  }
  std::vector<std::string_view> accepted(keys);
  for (const JsonMember& m : value.members) {
    bool known = false;
    for (std::string_view k : accepted) known = known || k == m.key;
    if (known) continue;
    std::string where = path_.empty() ? "at the top level" : "in " + path_;
    std::string message = fmt::format("unknown key {} {}", in_quotes(m.key), where);
    if (auto guess = closest_match(m.key, accepted)) {
      message += fmt::format(" (did you mean '{}'?)", *guess);
    } else {
      message += fmt::format(" (accepted: {})", join(accepted));
    }
    reader_.fail(m.key_position, "", std::move(message));
  }
}

const JsonValue& ObjectReader::require(std::string_view key) const {
  const JsonValue* v = get(key);
  if (!v) {
    reader_.fail(value_.position, path_, fmt::format("missing required key '{}'", key));
  }
  return *v;
}

}  // namespace ferry::config::schema
