// Parsing of --quic-lb; the bounds are lib/quic's (lb_config_error), so the tools accept exactly
// the configurations ferry does.
#include "tests/quic/quic_lb_option.hh"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <string>

#include "tests/quic/hex.hh"

namespace ferry::quic_test {

namespace {

std::uint8_t parse_small_number(std::string_view field, std::string_view value) {
  unsigned number = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (ec != std::errc() || end != value.data() + value.size() || number > 255) {
    throw std::invalid_argument("--quic-lb: " + std::string(field) + "=" + std::string(value) +
                                " is not a number");
  }
  return static_cast<std::uint8_t>(number);
}

}  // namespace

QuicLbOption parse_quic_lb_option(std::string_view text) {
  QuicLbOption option;
  bool have_config_id = false, have_nonce = false;
  while (!text.empty()) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw std::invalid_argument("--quic-lb: '" + std::string(item) + "' is not NAME=VALUE");
    }
    std::string_view name = item.substr(0, eq), value = item.substr(eq + 1);
    if (name == "config_id") {
      option.config.config_id = parse_small_number(name, value);
      have_config_id = true;
    } else if (name == "nonce_bytes") {
      option.config.nonce_bytes = parse_small_number(name, value);
      have_nonce = true;
    } else if (name == "server_id") {
      auto bytes = from_hex(value);
      if (!bytes || bytes->empty()) {
        throw std::invalid_argument("--quic-lb: server_id must be hex octets");
      }
      option.server_id = std::move(*bytes);
      option.config.server_id_bytes =
          static_cast<std::uint8_t>(std::min<std::size_t>(option.server_id.size(), 255));
    } else if (name == "key") {
      auto bytes = from_hex(value);
      if (!bytes || bytes->size() != quic::kAesKeyBytes) {
        throw std::invalid_argument("--quic-lb: key must be 32 hex digits (16 octets)");
      }
      option.config.key.emplace();
      std::copy(bytes->begin(), bytes->end(), option.config.key->begin());
    } else {
      throw std::invalid_argument("--quic-lb: unknown field '" + std::string(name) +
                                  "' (config_id, server_id, nonce_bytes, key)");
    }
  }
  if (!have_config_id || option.server_id.empty() || !have_nonce) {
    throw std::invalid_argument("--quic-lb needs config_id, server_id and nonce_bytes");
  }
  if (std::string why = quic::lb_config_error(option.config); !why.empty()) {
    throw std::invalid_argument("--quic-lb: " + why);
  }
  return option;
}

}  // namespace ferry::quic_test
