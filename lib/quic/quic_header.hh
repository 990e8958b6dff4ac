// Finds the destination connection ID of a UDP payload by the QUIC invariants (RFC 8999): a long
// header carries the DCID length; a short header does not, so its length comes from the
// QUIC-LB configuration that the first DCID octet names. Never reads outside the payload.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace ferry::quic {

enum class HeaderForm : std::uint8_t { long_header, short_header };

enum class HeaderStatus : std::uint8_t {
  ok,
  not_quic,             // an empty datagram: nothing to read a header from
  truncated,            // a long header shorter than its version, DCID length and DCID
  version_negotiation,  // version 0: a server's packet, never one a client sends to a VIP
  dcid_too_long,        // a long header DCID over QUIC v1's 20 octets
};
std::string_view to_string(HeaderStatus status);

// The first octet's top bit: 1 for a long header. Every other bit is version-specific; per the
// draft's appendix on DTLS, anything with the bit clear is read as a short header.
inline constexpr std::uint8_t kLongHeaderBit = 0x80;
inline constexpr std::size_t kLongHeaderDcidOffset = 6;  // first octet, version, DCID length
inline constexpr std::size_t kShortHeaderDcidOffset = 1;

struct QuicHeader {
  HeaderStatus status = HeaderStatus::not_quic;
  HeaderForm form = HeaderForm::short_header;
  std::uint32_t version = 0;  // long header only
  // Long header: the DCID the packet declares, inside the payload. Short header: the octets
  // after the first one (at most 20), of which the configuration takes its CID length.
  std::span<const std::uint8_t> dcid;
};

QuicHeader parse_quic_header(std::span<const std::uint8_t> payload) noexcept;

}  // namespace ferry::quic
