// Direct server return encapsulation: puts an outer IPv4/IPv6 header (IPIP) or an outer IP + UDP
// header (GUE variant 1) in front of an unchanged inner IP packet, growing the frame at its front.
#pragma once

#include <cstdint>
#include <string_view>

#include "lib/common/net.hh"
#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

enum class EncapKind : std::uint8_t {
  ipip,  // outer IP, protocol / next header 4 (inner IPv4) or 41 (inner IPv6)
  gue,   // outer IP + UDP, the inner IP packet right after the UDP header (GUE variant 1)
};

inline constexpr std::uint8_t kEncapTtl = 64;  // outer IPv4 TTL / IPv6 hop limit

// Bytes an encapsulation adds in front of the inner IP packet: 20 / 40 (IPIP over IPv4 / IPv6),
// 28 / 48 (GUE). 0 for an unknown kind.
constexpr std::uint32_t encap_overhead(EncapKind kind, bool outer_is_v6) {
  std::uint32_t ip = outer_is_v6 ? kIpv6HeaderBytes : kIpv4MinHeaderBytes;
  switch (kind) {
    case EncapKind::ipip:
      return ip;
    case EncapKind::gue:
      return ip + kUdpHeaderBytes;
  }
  return 0;
}

// The outer IP packet's length (what the egress MTU must hold): the inner IP packet's plus the
// overhead. The MTU check is the caller's, before encapsulate().
constexpr std::uint32_t encapsulated_ip_bytes(std::uint32_t inner_ip_bytes, EncapKind kind,
                                              bool outer_is_v6) {
  return inner_ip_bytes + encap_overhead(kind, outer_is_v6);
}

// The outer header to build. `flow_hash` is the low 32 bits of flow_hash() (Maglev draws on the
// high half): 20 of them are the IPv6 flow label (RFC 6438), 14 the GUE source port, so the
// backend NIC's RSS spreads the flows over its queues.
struct EncapHeader {
  EncapKind kind = EncapKind::ipip;
  net::IpAddress source;       // the same family as destination
  net::IpAddress destination;  // the backend: its family is the outer one
  std::uint16_t gue_port = 0;  // GUE: the UDP destination port (host order; 0 is refused)
  std::uint16_t ip_id = 0;     // outer IPv4 identification
  std::uint32_t flow_hash = 0;
};

// Why encapsulate() refused; the frame is then untouched. One counter per reason.
enum class EncapError : std::uint8_t {
  none = 0,
  no_headroom,       // fewer bytes before the frame in `room` than the overhead
  not_whole_packet,  // the inner packet is not in `room` whole, or its length fields disagree
                     // with p.l3_bytes (IHL, total / payload length), or p.l3_offset is no L2
                     // header parse_frame() makes
  version_mismatch,  // the IP version nibble or the ethertype before it is not p.version's
  bad_outer,         // source and destination families differ, GUE port 0, an unknown kind
  too_long,          // an outer length field would pass 65,535
};
inline constexpr std::size_t kEncapErrorCount = static_cast<std::size_t>(EncapError::too_long) + 1;

// Stable snake_case name, for metrics labels ("reason") and logs.
std::string_view to_string(EncapError e);

// Where the encapsulated frame is in `room`: frame_offset is the old frame's offset minus the
// overhead (its UMEM descriptor address moves back by as much), and it ends where the inner IP
// packet ends (Ethernet padding is dropped).
struct Encapsulated {
  EncapError error = EncapError::none;
  std::uint32_t frame_offset = 0;
  std::uint32_t frame_bytes = 0;

  bool ok() const { return error == EncapError::none; }
  FrameBytes frame(FrameBytes room) const { return room.subspan(frame_offset, frame_bytes); }
};

// Encapsulates the frame at `frame_offset` in `room` (the UMEM chunk from its headroom on), whose
// parse `p` describes (offsets from the frame start, as parse_frame() or parse_fragment() fills
// them; any whole IPv4 packet, a fragment too, or IPv6 packet). The L2 header (MACs, VLAN tags)
// moves `overhead` bytes forward with the outer family's ethertype; the outer header goes between
// it and the inner packet, whose bytes are neither moved nor changed.
//
// Outer header: TTL / hop limit kEncapTtl; DSCP copied from the inner packet, ECN as RFC 6040's
// normal mode (Linux's INET_ECN_encapsulate: the inner ECN, CE sent as ECT(0)); IPv4: DF copied
// from an inner IPv4 packet, set for an inner IPv6 one, header checksum; IPv6: flow label from
// the flow hash. GUE: source port 0xc000 | 14 bits of the flow hash; UDP checksum 0 over IPv4
// (RFC 768), over IPv6 the full checksum over the pseudo-header, UDP header and inner packet.
//
// On success p describes the outer packet (as build_icmp_error() refills it), so route() forwards
// it to the backend: outer version, addresses, protocol (4 / 41 / UDP) and hop limit; l4 is the
// UDP header (GUE) or the inner IP packet (IPIP, payload after its IP header); ports are GUE's or
// 0. Copy p first if the inner tuple is still needed, and read the XDP metadata in the headroom
// before: the outer header is written over it. On refusal nothing is written.
Encapsulated encapsulate(FrameBytes room, std::uint32_t frame_offset, ParsedPacket& p,
                         const EncapHeader& header) noexcept;

// The outer IPv4 source for an IPIP flow: `source_prefix` with the host bits from `flow_hash`, so
// backends that hash on the outer addresses (RSS over IPIP) spread the flows. A /32 gives
// `source`; a /31 either address (RFC 3021); a shorter prefix never its all-zeros or all-ones
// host part (those flows get `source`). Not an IPv4 prefix: `source`.
net::IpAddress ipip_source_in_prefix(const net::Prefix& source_prefix, const net::IpAddress& source,
                                     std::uint32_t flow_hash) noexcept;

}  // namespace ferry::packet
