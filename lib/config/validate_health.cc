// The health object: common timing keys, then "type" and only the keys of that type, each value
// checked where it is written (hex, DNS names and types, RCODE names, HTTP status bounds).
#include "lib/config/validate_health.hh"

#include <array>

namespace ferry::config::schema {
namespace {

constexpr std::size_t kMaxPayloadBytes = 1024;  // send/expect: one small datagram
constexpr std::size_t kMaxPathBytes = 1024;     // the request stays far below the 4 KiB read
constexpr std::size_t kMaxHostBytes = 255;

struct TypeKeys {
  HealthCheckType type;
  std::array<std::string_view, 4> keys;  // empty entries unused
};

constexpr std::array<TypeKeys, 4> kTypeKeys = {{
    {HealthCheckType::tcp, {}},
    {HealthCheckType::udp, {"send", "send_hex", "expect", "expect_hex"}},
    {HealthCheckType::dns, {"name", "qtype", "rcodes"}},
    {HealthCheckType::http, {"path", "host", "expect_status"}},
}};

std::string keys_of(HealthCheckType type) {
  std::string out;
  for (const auto& t : kTypeKeys) {
    if (t.type != type) continue;
    for (std::string_view k : t.keys) {
      if (k.empty()) continue;
      if (!out.empty()) out += ", ";
      out += k;
    }
  }
  return out.empty() ? "none of its own" : out;
}

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '*';
}

// Printable ASCII without spaces: what may stand in a request line or a Host header.
bool is_token_text(std::string_view s) {
  for (char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

class HealthReader : public SchemaReader {
 public:
  explicit HealthReader(const SchemaReader& reader) : SchemaReader(reader) {}

  HealthCheckConfig read(const JsonValue& v, const std::string& path,
                         const Protocols& protocols) const {
    HealthCheckConfig h;
    const JsonValue* type = v.find("type");
    if (type) {
      h.type = read_choice<HealthCheckType>(*type, child(path, "type"),
                                            {{"tcp", HealthCheckType::tcp},
                                             {"udp", HealthCheckType::udp},
                                             {"dns", HealthCheckType::dns},
                                             {"http", HealthCheckType::http}});
      check_protocols(h.type, *type, child(path, "type"), protocols);
    }
    refuse_other_types_keys(v, path, h.type);
    ObjectReader o(
        *this, v, path,
        {"type", "port", "interval_ms", "timeout_ms", "rise", "fall", "send", "send_hex", "expect",
         "expect_hex", "name", "qtype", "rcodes", "path", "host", "expect_status"});
    read_timing(o, h);
    if (auto* p = o.get("port"); p && p->kind != Kind::null) {
      h.port = static_cast<std::uint16_t>(read_integer(*p, o.path_of("port"), 1, 65535));
    }
    switch (h.type) {
      case HealthCheckType::tcp:
        break;
      case HealthCheckType::udp:
        read_udp(o, h);
        break;
      case HealthCheckType::dns:
        read_dns(o, h);
        break;
      case HealthCheckType::http:
        read_http(o, h);
        break;
    }
    return h;
  }

 private:
  // udp and dns checks send datagrams, http speaks TCP: each needs its protocol on the service.
  // A service with both may use any type; the one check decides the backend's single up/down flag.
  void check_protocols(HealthCheckType type, const JsonValue& at, const std::string& path,
                       const Protocols& protocols) const {
    bool needs_udp = type == HealthCheckType::udp || type == HealthCheckType::dns;
    bool needs_tcp = type == HealthCheckType::http;
    if ((needs_udp && !protocols.udp) || (needs_tcp && !protocols.tcp)) {
      fail(at.position, path,
           fmt::format("a {} check needs a service that serves {}, but this one serves {} only; "
                       "use type \"tcp\"{}",
                       to_string(type), needs_udp ? "UDP" : "TCP", needs_udp ? "TCP" : "UDP",
                       needs_udp ? "" : " or \"udp\"/\"dns\""));
    }
  }

  void refuse_other_types_keys(const JsonValue& v, const std::string& path,
                               HealthCheckType type) const {
    for (const JsonMember& m : v.members) {
      for (const auto& t : kTypeKeys) {
        if (t.type == type) continue;
        for (std::string_view k : t.keys) {
          if (k.empty() || k != m.key) continue;
          fail(m.key_position, path,
               fmt::format("'{}' is a key of {} checks; a {} check takes {} (set \"type\": \"{}\" "
                           "to use it)",
                           m.key, to_string(t.type), to_string(type), keys_of(type),
                           to_string(t.type)));
        }
      }
    }
  }

  void read_timing(const ObjectReader& o, HealthCheckConfig& h) const {
    const JsonValue* interval = o.get("interval_ms");
    if (interval) h.interval_ms = read_u32(*interval, o.path_of("interval_ms"), 10, 3600000);
    if (auto* t = o.get("timeout_ms")) {
      h.timeout_ms = read_u32(*t, o.path_of("timeout_ms"), 1, std::int64_t{h.interval_ms} - 1);
    } else if (h.timeout_ms >= h.interval_ms) {
      fail(interval->position, o.path_of("interval_ms"),
           fmt::format("{} must be greater than timeout_ms (default {}); set timeout_ms too",
                       h.interval_ms, h.timeout_ms));
    }
    if (auto* r = o.get("rise")) h.rise = read_u32(*r, o.path_of("rise"), 1, 100);
    if (auto* f = o.get("fall")) h.fall = read_u32(*f, o.path_of("fall"), 1, 100);
  }

  // "text" or "hex": the bytes of one of two spellings of the same payload; null when neither.
  std::optional<std::string> read_payload(const ObjectReader& o, std::string_view text_key,
                                          std::string_view hex_key) const {
    // null is the same as leaving the key out (to_json prints "expect": null for "any reply").
    const JsonValue* text = o.get(text_key);
    const JsonValue* hex = o.get(hex_key);
    if (text && text->kind == Kind::null) text = nullptr;
    if (hex && hex->kind == Kind::null) hex = nullptr;
    if (text && hex) {
      fail(hex->position, o.path_of(hex_key),
           fmt::format("give either '{}' or '{}', not both", text_key, hex_key));
    }
    if (text) {
      std::string path = o.path_of(text_key);
      const std::string& s = read_string(*text, path);
      check_payload_size(*text, path, s.size());
      return s;
    }
    if (!hex) return std::nullopt;
    std::string path = o.path_of(hex_key);
    const std::string& digits = read_string(*hex, path, "a string of hex digits");
    if (digits.size() % 2 != 0) {
      fail(hex->position, path,
           fmt::format("{} has an odd number of hex digits ({}); write two per byte",
                       in_quotes(digits), digits.size()));
    }
    std::string bytes;
    for (std::size_t i = 0; i < digits.size(); i += 2) {
      int hi = hex_value(digits[i]);
      int lo = hex_value(digits[i + 1]);
      if (hi < 0 || lo < 0) {
        fail(hex->position, path,
             fmt::format("{} is not hex: {} at offset {}", in_quotes(digits),
                         in_quotes(digits.substr(hi < 0 ? i : i + 1, 1)), hi < 0 ? i : i + 1));
      }
      bytes.push_back(static_cast<char>(hi * 16 + lo));
    }
    check_payload_size(*hex, path, bytes.size());
    return bytes;
  }

  void check_payload_size(const JsonValue& v, const std::string& path, std::size_t bytes) const {
    if (bytes > kMaxPayloadBytes) {
      fail(v.position, path,
           fmt::format("{} bytes is too long (at most {})", bytes, kMaxPayloadBytes));
    }
  }

  void read_udp(const ObjectReader& o, HealthCheckConfig& h) const {
    auto send = read_payload(o, "send", "send_hex");
    if (!send) {
      fail(o.value().position, o.path(),
           "a udp check needs 'send' (text) or 'send_hex' (bytes): the datagram it sends");
    }
    h.send = std::move(*send);
    h.expect = read_payload(o, "expect", "expect_hex");
  }

  void read_dns(const ObjectReader& o, HealthCheckConfig& h) const {
    if (auto* n = o.get("name")) {
      h.name = read_string(*n, o.path_of("name"), "a string (a domain name)");
      check_dns_name(*n, o.path_of("name"));
    }
    if (auto* q = o.get("qtype")) {
      h.qtype = read_choice<DnsQueryType>(*q, o.path_of("qtype"),
                                          {{"A", DnsQueryType::a},
                                           {"AAAA", DnsQueryType::aaaa},
                                           {"NS", DnsQueryType::ns},
                                           {"SOA", DnsQueryType::soa}});
    }
    if (auto* r = o.get("rcodes")) h.rcodes = read_rcodes(*r, o.path_of("rcodes"));
  }

  // Labels of letters, digits, '-', '_' and '*', 1..63 bytes each, 253 in all; "." is the root.
  void check_dns_name(const JsonValue& v, const std::string& path) const {
    std::string_view name = v.text;
    if (name == ".") return;
    std::string why;
    if (name.empty()) {
      why = "it is empty (the root is \".\")";
    } else if (name.size() > 254 || (name.size() == 254 && name.back() != '.')) {
      why = "it is longer than 253 characters";
    }
    std::string_view rest = name;
    if (!rest.empty() && rest.back() == '.') rest.remove_suffix(1);
    while (why.empty()) {
      auto dot = rest.find('.');
      std::string_view label = rest.substr(0, dot);
      if (label.empty()) why = "it has an empty label";
      if (label.size() > 63) why = fmt::format("label {} is longer than 63", in_quotes(label));
      for (char c : label) {
        if (why.empty() && !is_name_char(c)) {
          why = fmt::format("{} is not a letter, digit, '-', '_' or '*'",
                            in_quotes(std::string_view(&c, 1)));
        }
      }
      if (dot == std::string_view::npos) break;
      rest.remove_prefix(dot + 1);
    }
    if (!why.empty()) {
      fail(v.position, path, fmt::format("{} is not a domain name: {}", in_quotes(name), why));
    }
  }

  std::uint32_t read_rcodes(const JsonValue& v, const std::string& path) const {
    std::vector<std::string_view> names(kDnsRcodeNames.begin(), kDnsRcodeNames.end());
    expect(v, path, Kind::array, fmt::format("an array of RCODE names ({})", join(names)));
    if (v.items.empty()) fail(v.position, path, "must list at least one RCODE (e.g. \"NOERROR\")");
    std::uint32_t mask = 0;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& item = v.items[i];
      std::string item_path = element(path, i);
      std::uint32_t bit = 1u << read_choice<unsigned>(item, item_path,
                                                      {{"NOERROR", 0},
                                                       {"FORMERR", 1},
                                                       {"SERVFAIL", 2},
                                                       {"NXDOMAIN", 3},
                                                       {"NOTIMP", 4},
                                                       {"REFUSED", 5}});
      if (mask & bit)
        fail(item.position, item_path, fmt::format("'{}' is listed twice", item.text));
      mask |= bit;
    }
    return mask;
  }

  void read_http(const ObjectReader& o, HealthCheckConfig& h) const {
    if (auto* p = o.get("path")) {
      std::string path = o.path_of("path");
      h.path = read_string(*p, path, "a string (an absolute request path such as \"/healthz\")");
      if (h.path.empty() || h.path.front() != '/' || !is_token_text(h.path)) {
        fail(p->position, path,
             fmt::format("{} is not a request path: it must start with '/' and hold no spaces or "
                         "control characters",
                         in_quotes(h.path)));
      }
      if (h.path.size() > kMaxPathBytes) {
        fail(p->position, path, fmt::format("is longer than {} bytes", kMaxPathBytes));
      }
    }
    if (auto* host = o.get("host"); host && host->kind != Kind::null) {
      std::string path = o.path_of("host");
      const std::string& text = read_string(*host, path, "a string (the Host header) or null");
      if (text.empty() || text.size() > kMaxHostBytes || !is_token_text(text)) {
        fail(host->position, path,
             fmt::format("{} is not a Host header value (1..{} printable characters, no spaces)",
                         in_quotes(text), kMaxHostBytes));
      }
      h.host = text;
    }
    if (auto* s = o.get("expect_status")) read_status_range(*s, o.path_of("expect_status"), h);
  }

  void read_status_range(const JsonValue& v, const std::string& path, HealthCheckConfig& h) const {
    if (v.kind != Kind::array || v.items.size() != 2) {
      fail(v.position, path,
           fmt::format("expected [low, high], two HTTP statuses (100..599), got {}",
                       v.kind == Kind::array ? fmt::format("an array of {}", v.items.size())
                                             : describe(v)));
    }
    auto low = static_cast<std::uint16_t>(read_integer(v.items[0], element(path, 0), 100, 599));
    auto high = static_cast<std::uint16_t>(read_integer(v.items[1], element(path, 1), 100, 599));
    if (low > high) {
      fail(v.items[1].position, element(path, 1),
           fmt::format("{} is below the low bound {}; write [low, high]", high, low));
    }
    h.status_low = low;
    h.status_high = high;
  }
};

}  // namespace

HealthCheckConfig read_health(const SchemaReader& reader, const JsonValue& v,
                              const std::string& path, const Protocols& protocols) {
  return HealthReader(reader).read(v, path, protocols);
}

}  // namespace ferry::config::schema
