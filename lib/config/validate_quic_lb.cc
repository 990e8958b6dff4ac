// The QUIC-LB keys: configurations (codepoint, lengths, key) and backend server IDs. The key is a
// secret, so an error about it says what is wrong with it without ever repeating it.
#include "lib/config/validate_quic_lb.hh"

#include <map>
#include <optional>

#include "lib/quic/lb_config.hh"

namespace ferry::config::schema {
namespace {

std::optional<int> hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return std::nullopt;
}

// Octets of `text` when it is only hex digits, an even number of them; nullopt otherwise.
std::optional<std::vector<std::uint8_t>> parse_hex(const std::string& text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    auto high = hex_digit(text[i]), low = hex_digit(text[i + 1]);
    if (!high || !low) return std::nullopt;
    out.push_back(static_cast<std::uint8_t>(*high << 4 | *low));
  }
  return out;
}

// What to_json() writes in place of a key.
constexpr std::string_view kRedactedKey = "(set)";

std::optional<std::array<std::uint8_t, 16>> read_key(const SchemaReader& r, const JsonValue& v,
                                                     const std::string& path) {
  if (v.kind == Kind::null) return std::nullopt;
  if (v.kind != Kind::string) {
    r.fail(v.position, path,
           fmt::format("expected 32 hex digits (a 16-octet AES-128 key) or null, got {}",
                       describe(v)));
  }
  if (v.text == kRedactedKey) {
    r.fail(v.position, path,
           "'(set)' is how ferryctl config shows a key it keeps secret; write the key's 32 hex "
           "digits here");
  }
  auto bytes = parse_hex(v.text);
  if (!bytes || bytes->size() != 16) {
    bool all_hex = true;
    for (char c : v.text) all_hex = all_hex && hex_digit(c).has_value();
    // The value is not repeated: it may be most of a real key.
    r.fail(v.position, path,
           fmt::format("expected 32 hex digits (a 16-octet AES-128 key), got {} characters{}",
                       v.text.size(), all_hex ? "" : ", not all of them hex digits"));
  }
  std::array<std::uint8_t, 16> key;
  std::copy(bytes->begin(), bytes->end(), key.begin());
  return key;
}

QuicLbConfigEntry read_entry(const SchemaReader& r, const JsonValue& v, const std::string& path) {
  ObjectReader o(r, v, path, {"id", "server_id_bytes", "nonce_bytes", "key"});
  QuicLbConfigEntry e;
  const JsonValue& id = o.require("id");
  if (id.kind == Kind::number && id.integer == 7) {
    r.fail(id.position, o.path_of("id"),
           "7 (0b111) is the codepoint of unroutable connection IDs; use 0..6");
  }
  e.id = static_cast<std::uint8_t>(r.read_integer(id, o.path_of("id"), 0, 6));
  e.server_id_bytes = static_cast<std::uint8_t>(
      r.read_integer(o.require("server_id_bytes"), o.path_of("server_id_bytes"),
                     quic::kMinServerIdBytes, quic::kMaxServerIdBytes));
  const JsonValue& nonce = o.require("nonce_bytes");
  e.nonce_bytes = static_cast<std::uint8_t>(
      r.read_integer(nonce, o.path_of("nonce_bytes"), quic::kMinNonceBytes, quic::kMaxNonceBytes));
  if (e.server_id_bytes + e.nonce_bytes > quic::kMaxPlaintextBytes) {
    r.fail(nonce.position, o.path_of("nonce_bytes"),
           fmt::format("server_id_bytes + nonce_bytes is {} + {} = {}; at most {} fit a 20-octet "
                       "connection ID",
                       e.server_id_bytes, e.nonce_bytes, e.server_id_bytes + e.nonce_bytes,
                       quic::kMaxPlaintextBytes));
  }
  if (const JsonValue* key = o.get("key")) e.key = read_key(r, *key, o.path_of("key"));
  return e;
}

}  // namespace

QuicLbConfig read_quic_lb(const SchemaReader& r, const JsonValue& v, const std::string& path) {
  ObjectReader o(r, v, path, {"configs"});
  const JsonValue& configs = o.require("configs");
  const std::string configs_path = o.path_of("configs");
  r.expect(configs, configs_path, Kind::array,
           "an array of {\"id\", \"server_id_bytes\", \"nonce_bytes\", \"key\"} objects");
  if (configs.items.empty()) {
    r.fail(configs.position, configs_path,
           "needs at least one configuration; remove quic_lb (or set it to null) to turn it off");
  }
  QuicLbConfig out;
  std::map<int, SourcePosition> ids;
  for (std::size_t i = 0; i < configs.items.size(); ++i) {
    const std::string item_path = element(configs_path, i);
    QuicLbConfigEntry e = read_entry(r, configs.items[i], item_path);
    const JsonValue& id = *configs.items[i].find("id");
    if (auto [it, inserted] = ids.emplace(e.id, id.position); !inserted) {
      r.fail(id.position, child(item_path, "id"),
             fmt::format("duplicate config id {} (first defined at {}); each configuration needs "
                         "its own codepoint 0..6",
                         e.id, position_text(it->second)));
    }
    out.configs.push_back(e);
  }
  return out;
}

ServerId read_server_id(const SchemaReader& r, const JsonValue& v, const std::string& path) {
  r.expect(v, path, Kind::string, "a string of hex digits (the backend's QUIC-LB server ID)");
  auto bytes = parse_hex(v.text);
  if (!bytes || bytes->empty() || bytes->size() > quic::kMaxServerIdBytes) {
    r.fail(v.position, path,
           fmt::format("{} is not a server ID: expected 2..30 hex digits, an even number (1..15 "
                       "octets), e.g. \"0001\"",
                       in_quotes(v.text)));
  }
  return *bytes;
}

void check_quic_lb_service(const SchemaReader& r, const ServiceConfig& s, const JsonValue& item,
                           const std::string& path) {
  if (const JsonValue* q = item.find("quic_lb"); q && s.quic_lb) {
    if (!s.protocols.udp) {
      r.fail(q->position, child(path, "quic_lb"),
             "QUIC runs over UDP and this service serves TCP only; add \"udp\" to \"protocols\" or "
             "remove quic_lb");
    }
    if (s.mode != ServiceMode::proxy) {
      r.fail(q->position, child(path, "quic_lb"),
             fmt::format("applies to UDP services in mode 'proxy', not mode '{}'; remove it",
                         to_string(s.mode)));
    }
  }
  const JsonValue* backends = item.find("backends");
  if (backends == nullptr || backends->kind != Kind::array) return;
  std::map<ServerId, SourcePosition> seen;
  for (std::size_t i = 0; i < backends->items.size(); ++i) {
    const JsonValue* id = backends->items[i].find("server_id");
    const ServerId* server_id = s.server_id(i);
    if (id == nullptr || server_id == nullptr) continue;
    const std::string id_path = child(element(child(path, "backends"), i), "server_id");
    if (!s.quic_lb) {
      r.fail(id->position, id_path,
             "a server ID needs the service's quic_lb section; add quic_lb or remove server_id");
    }
    bool fits = false;
    std::vector<std::string> lengths;
    for (const auto& c : s.quic_lb->configs) {
      fits = fits || c.server_id_bytes == server_id->size();
      lengths.push_back(fmt::format("{} (config {})", c.server_id_bytes, c.id));
    }
    if (!fits) {
      std::string joined;
      for (const auto& l : lengths) joined += (joined.empty() ? "" : ", ") + l;
      r.fail(id->position, id_path,
             fmt::format("server ID {} is {} octets, but quic_lb's server_id_bytes are {}",
                         server_id_text(*server_id), server_id->size(), joined));
    }
    if (auto [it, inserted] = seen.emplace(*server_id, id->position); !inserted) {
      r.fail(id->position, id_path,
             fmt::format("duplicate server ID {} (first given at {}); each backend needs its own",
                         server_id_text(*server_id), position_text(it->second)));
    }
  }
}

}  // namespace ferry::config::schema
