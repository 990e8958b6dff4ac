// What a fast-path worker asks of a QUIC-LB service per packet: built once at config load (codecs
// indexed by config rotation codepoint, key schedules, the server ID map), then route() reads a UDP
// payload and names the backend its DCID encodes, or why the 4-tuple fallback must decide.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "lib/quic/cid_codec.hh"
#include "lib/quic/quic_header.hh"
#include "lib/quic/server_id_map.hh"

namespace ferry::quic {

// routed, or the reason for the fallback (one counter each); stable snake_case names for labels.
enum class QuicLbOutcome : std::uint8_t {
  routed = 0,
  not_quic,              // empty datagram
  truncated_header,      // long header shorter than its own fields
  version_negotiation,   // long header of version 0
  dcid_too_long,         // long header DCID over 20 octets
  unroutable_codepoint,  // config rotation bits 0b111: the server had no configuration
  unknown_config,        // a codepoint no configuration of the service uses
  cid_too_short,         // fewer DCID octets than the configuration needs
  unknown_server_id,     // decoded, but no backend has that server ID (e.g. a client's Initial)
  // Not route()'s: the caller's, when the ID names a backend that may not take packets (down by
  // health, disabled, or removed from the service).
  backend_unusable,
};
inline constexpr std::size_t kQuicLbOutcomeCount =
    static_cast<std::size_t>(QuicLbOutcome::backend_unusable) + 1;
std::string_view to_string(QuicLbOutcome outcome);

struct QuicLbRoute {
  static constexpr std::uint8_t kNoConfig = 0xff;
  static constexpr std::uint32_t kNoBackend = ServerIdMap::kNotFound;

  QuicLbOutcome outcome = QuicLbOutcome::not_quic;
  std::uint8_t config_id = kNoConfig;  // the DCID's codepoint, once read (for per-config counts)
  std::uint32_t backend = kNoBackend;  // index into the service's backends when routed
  bool routed() const { return outcome == QuicLbOutcome::routed; }
};

class QuicLbService {
 public:
  // Throws std::invalid_argument for a configuration out of the draft's bounds, two configurations
  // on one codepoint, a duplicate server ID, or a server ID whose length no configuration has.
  // A server ID serves every configuration of its length.
  QuicLbService(std::span<const LbConfig> configs, std::span<const ServerIdEntry> servers,
                AesEngine engine);

  // A UDP payload to a backend or a fallback reason. No allocation, lock, syscall or exception.
  QuicLbRoute route(std::span<const std::uint8_t> udp_payload) const noexcept;
  // The same for a DCID already found (a long header's; or a short header's octets after the
  // first, of which the configuration takes its length).
  QuicLbRoute route_dcid(std::span<const std::uint8_t> dcid) const noexcept;

  const CidCodec* codec(std::uint8_t config_id) const {
    return config_id < kConfigIdCount && codecs_[config_id] ? &*codecs_[config_id] : nullptr;
  }

 private:
  std::array<std::optional<CidCodec>, kConfigIdCount> codecs_;
  ServerIdMap servers_;
};

}  // namespace ferry::quic
