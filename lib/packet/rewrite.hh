// In-place rewrites of a parsed frame's addresses and ports with incremental (RFC 1624) checksum
// updates: the building block of balance's DNAT and its reverse.
#pragma once

#include <array>
#include <cstdint>

#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

enum class Side : std::uint8_t { source, destination };

// Writes `address` (its first p.address_bytes() bytes) and `port` (host order) into the frame's
// source or destination fields and keeps p in step. Fixes the IPv4 header checksum (addresses are
// in it) and the UDP/TCP checksum (addresses via the pseudo-header, and the port). A UDP checksum
// of 0 ("none sent") stays 0; a UDP result of 0 is written as 0xffff. `frame` must be the frame
// `p` was parsed from.
void rewrite_endpoint(FrameBytes frame, ParsedPacket& p, Side side,
                      const std::array<std::uint8_t, 16>& address, std::uint16_t port) noexcept;

// Writes `address` into the source or destination field of the IP header and keeps p in step,
// with the IPv4 header checksum updated; no transport header is touched. For the fragments of a
// datagram after the first, whose UDP header (and checksum) travels in the first.
void rewrite_address(FrameBytes frame, ParsedPacket& p, Side side,
                     const std::array<std::uint8_t, 16>& address) noexcept;

// Decrements the IPv4 TTL (fixing the header checksum) or the IPv6 hop limit, and keeps p in step.
// The caller has checked that it is > 1.
void decrement_hop_limit(FrameBytes frame, ParsedPacket& p) noexcept;

// A cheap guard the actions run once: `frame` still holds every header `p` describes, so a
// caller mixing up frames (or passing a packet whose parse failed) gets a malformed drop instead
// of an out-of-bounds write. The contract remains: p comes from a successful parse of frame.
inline bool frame_matches(ConstFrameBytes frame, const ParsedPacket& p) {
  std::uint32_t transport_bytes = p.fragment_tail ? 0 : kUdpHeaderBytes;
  return p.l3_bytes != 0 && p.payload_offset >= p.l4_offset + transport_bytes &&
         frame.size() >= p.l3_offset + std::uint64_t{p.l3_bytes} &&
         frame.size() >= p.payload_offset;
}

}  // namespace ferry::packet
