// One QUIC-LB configuration ready to use: encode (what a server does when it issues a CID) and
// decode (what ferry does per packet) in the plaintext, single-pass and four-pass forms.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "lib/quic/aes128.hh"
#include "lib/quic/lb_config.hh"

namespace ferry::quic {

class CidCodec {
 public:
  // Builds the key schedule. Throws std::invalid_argument when `config` is out of the draft's
  // bounds (lb_config_error) or `engine` is aesni on a CPU without it.
  CidCodec(const LbConfig& config, AesEngine engine);

  const LbConfig& config() const { return config_; }
  std::size_t cid_bytes() const { return config_.cid_bytes(); }
  std::size_t server_id_bytes() const { return config_.server_id_bytes; }
  LbAlgorithm algorithm() const { return algorithm_; }
  std::optional<AesEngine> engine() const {
    return aes_ ? std::optional<AesEngine>(aes_->engine()) : std::nullopt;
  }

  // The server's side: writes cid_bytes() octets to `cid` from the server ID and nonce (of the
  // configured lengths; std::invalid_argument otherwise). `low_bits` are the first octet's five
  // bits after the config rotation bits; self_encoded_length() for servers that encode it.
  void encode(std::span<const std::uint8_t> server_id, std::span<const std::uint8_t> nonce,
              std::uint8_t low_bits, std::span<std::uint8_t> cid) const;
  std::uint8_t self_encoded_length() const {
    return static_cast<std::uint8_t>(config_.plaintext_bytes());
  }

  // The load balancer's side: the server ID of `cid`, which holds at least cid_bytes() octets
  // (more are the server's own and ignored) and whose first octet names this configuration.
  // Writes server_id_bytes() octets. No allocation, lock, syscall or exception.
  void decode(const std::uint8_t* cid, std::uint8_t* server_id) const noexcept;

 private:
  LbConfig config_;
  LbAlgorithm algorithm_;
  std::optional<Aes128> aes_;
};

}  // namespace ferry::quic
