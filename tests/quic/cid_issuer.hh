// The connection IDs the test server issues: QUIC-LB encoded with ferry's CidCodec (server ID +
// random nonce, config rotation bits = config id, low five bits the self-encoded length), exactly
// as a server integration does; or 18 random octets when the server runs without QUIC-LB.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "lib/quic/cid_codec.hh"
#include "tests/quic/quic_lb_option.hh"

namespace ferry::quic_test {

// Fills `out` from the kernel's random source (getrandom); throws std::system_error.
void fill_random(std::span<std::uint8_t> out);

class CidIssuer {
 public:
  static constexpr std::size_t kRandomCidBytes = 18;

  explicit CidIssuer(const std::optional<QuicLbOption>& quic_lb);

  // Every CID this server issues has this length (a short header does not carry it).
  std::size_t cid_bytes() const { return codec_ ? codec_->cid_bytes() : kRandomCidBytes; }
  // Writes cid_bytes() octets to `cid`.
  void issue(std::span<std::uint8_t> cid) const;

 private:
  std::optional<quic::CidCodec> codec_;
  std::vector<std::uint8_t> server_id_;
};

}  // namespace ferry::quic_test
