// One QUIC-LB configuration (draft-ietf-quic-load-balancers-21 section 5.3): its config rotation
// codepoint, field lengths and optional key, the draft's bounds on them, and the first CID octet.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "lib/quic/aes128.hh"

namespace ferry::quic {

// QUIC v1 limits a connection ID to 20 octets (RFC 9000 17.2).
inline constexpr std::size_t kMaxCidBytes = 20;
// The three config rotation bits name codepoints 0..6; 0b111 marks an unroutable CID.
inline constexpr std::uint8_t kConfigIdCount = 7;
inline constexpr std::uint8_t kUnroutableConfigId = 7;
inline constexpr std::size_t kMinServerIdBytes = 1;
inline constexpr std::size_t kMaxServerIdBytes = 15;
inline constexpr std::size_t kMinNonceBytes = 4;
inline constexpr std::size_t kMaxNonceBytes = 18;
inline constexpr std::size_t kMaxPlaintextBytes = 19;  // server ID + nonce
// Server ID + nonce that form one AES block: the single-pass form.
inline constexpr std::size_t kSinglePassBytes = 16;

enum class LbAlgorithm : std::uint8_t {
  plaintext,    // no key: the server ID is in clear after the first octet
  single_pass,  // key, server ID + nonce == 16: one AES-128-ECB block
  four_pass,    // key, any other length: the four-round Feistel network
};
std::string_view to_string(LbAlgorithm algorithm);

struct LbConfig {
  std::uint8_t config_id = 0;  // 0..6
  std::uint8_t server_id_bytes = 0;
  std::uint8_t nonce_bytes = 0;
  std::optional<AesKey> key;  // nullopt: plaintext

  std::size_t plaintext_bytes() const { return std::size_t{server_id_bytes} + nonce_bytes; }
  // The CID octets the configuration needs: the first octet, then server ID and nonce.
  std::size_t cid_bytes() const { return 1 + plaintext_bytes(); }
  LbAlgorithm algorithm() const {
    if (!key) return LbAlgorithm::plaintext;
    return plaintext_bytes() == kSinglePassBytes ? LbAlgorithm::single_pass
                                                 : LbAlgorithm::four_pass;
  }
  bool operator==(const LbConfig&) const = default;
};

// Empty when `config` is within the draft's bounds; otherwise what is out of them.
std::string lb_config_error(const LbConfig& config);

inline std::uint8_t config_id_of(std::uint8_t first_octet) {
  return static_cast<std::uint8_t>(first_octet >> 5);
}
// The first octet: the config rotation bits, then five bits the server chooses: the length of
// the CID after this octet when it self-encodes its length (section 2.3), else random bits.
inline std::uint8_t make_first_octet(std::uint8_t config_id, std::uint8_t low_bits) {
  return static_cast<std::uint8_t>((config_id << 5) | (low_bits & 0x1f));
}

}  // namespace ferry::quic
