// Helpers of the lib/quic tests: hex text to octets, and the AES engines this CPU can run (both
// engines are tested wherever the CPU has AES-NI; the portable one always).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lib/quic/aes128.hh"
#include "lib/quic/lb_config.hh"

namespace ferry::quic::test {

inline std::vector<std::uint8_t> hex(std::string_view text) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    throw std::invalid_argument("not a hex digit");
  };
  if (text.size() % 2 != 0) throw std::invalid_argument("odd number of hex digits");
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(nibble(text[i]) << 4 | nibble(text[i + 1])));
  }
  return out;
}

inline AesKey key_of(std::string_view text) {
  auto bytes = hex(text);
  if (bytes.size() != kAesKeyBytes) throw std::invalid_argument("not a 16-octet key");
  AesKey k;
  std::copy(bytes.begin(), bytes.end(), k.begin());
  return k;
}

inline std::string to_hex(const std::uint8_t* p, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    s += kDigits[p[i] >> 4];
    s += kDigits[p[i] & 0xf];
  }
  return s;
}

// A configuration by its four fields (no key: plaintext).
inline LbConfig lb(int config_id, int server_id_bytes, int nonce_bytes,
                   std::optional<AesKey> key = std::nullopt) {
  LbConfig c;
  c.config_id = static_cast<std::uint8_t>(config_id);
  c.server_id_bytes = static_cast<std::uint8_t>(server_id_bytes);
  c.nonce_bytes = static_cast<std::uint8_t>(nonce_bytes);
  c.key = key;
  return c;
}

inline std::vector<AesEngine> engines_to_test() {
  std::vector<AesEngine> out{AesEngine::portable};
  if (cpu_has_aesni()) out.push_back(AesEngine::aesni);
  return out;
}

inline std::string engine_name(const ::testing::TestParamInfo<AesEngine>& info) {
  return std::string(to_string(info.param));
}

}  // namespace ferry::quic::test
