// ICMP and ICMPv6 errors about UDP datagrams: parsing the error and the datagram it quotes, and
// translating both as a NAT does (RFC 5508 4.2, RFC 4787 9), so the sender's stack matches the
// error to its socket. Pure functions over byte spans; never read outside the frame.
#pragma once

#include <array>
#include <cstdint>

#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/rewrite.hh"

namespace ferry::packet {

inline constexpr std::uint32_t kIcmpHeaderBytes = 8;  // type, code, checksum, one 32-bit word
inline constexpr std::uint8_t kIcmpDestinationUnreachable = 3;  // ICMPv4 types
inline constexpr std::uint8_t kIcmpTimeExceeded = 11;
inline constexpr std::uint8_t kIcmpParameterProblem = 12;
inline constexpr std::uint8_t kIcmpFragmentationNeeded = 4;      // code of type 3
inline constexpr std::uint8_t kIcmp6DestinationUnreachable = 1;  // ICMPv6 types
inline constexpr std::uint8_t kIcmp6PacketTooBig = 2;
inline constexpr std::uint8_t kIcmp6TimeExceeded = 3;
inline constexpr std::uint8_t kIcmp6ParameterProblem = 4;

// An ICMP(v6) error and the datagram it quotes. `outer` (a ParsedPacket) holds the outer IP
// header as parse_frame() fills it (protocol IPPROTO_ICMP / IPPROTO_ICMPV6, l4_offset at the ICMP
// header, l4_bytes the whole ICMP message; its ports and payload fields are left as they were
// until translate_icmp_error() sets them).
struct IcmpError {
  std::uint8_t type = 0;
  std::uint8_t code = 0;
  std::uint32_t icmp_offset = 0;  // the ICMP header, from the frame start
  std::uint32_t icmp_bytes = 0;   // the ICMP message: header + quote (outer l4_bytes)
  // The quoted datagram as it sat in the sender's packet: its IP header and at least its whole
  // UDP header (ports, length, checksum; a shorter quote is malformed).
  std::uint32_t quoted_l3_offset = 0;        // from the frame start
  std::uint32_t quoted_l3_header_bytes = 0;  // with options; IPv6: 40, 48 with a Fragment header
  std::uint32_t quoted_l4_offset = 0;
  // How many bytes of the UDP header and data are quoted (>= 8): what the ICMP message holds up to
  // the quoted total length. Bytes past it (RFC 4884 zero padding and extensions, as MPLS routers
  // send in time exceeded) are not the datagram's and are not counted.
  std::uint32_t quoted_l4_bytes = 0;
  std::array<std::uint8_t, 16> quoted_src{};  // net::IpAddress::bytes layout
  std::array<std::uint8_t, 16> quoted_dst{};
  std::uint16_t quoted_src_port = 0;  // host order
  std::uint16_t quoted_dst_port = 0;
  // Where the quote came from: its first fragment (or an unfragmented datagram). A quoted later
  // fragment has no ports and is refused (not_udp).
};

enum class IcmpParse : std::uint8_t {
  error,         // an error (the types above) quoting a UDP datagram: `e` is filled
  not_an_error,  // echo, neighbour discovery, router advertisements..., or an IPv4 fragment of
                 // an error: the kernel's
  not_udp,       // an error about something other than UDP (or a quoted later fragment)
  malformed,     // truncated ICMP header, a quote shorter than its IP header + 8 bytes, a quoted
                 // version that differs from the outer one, quoted lengths that do not add up
                 // (IHL < 5, a quoted total length shorter than its IP header + 8 bytes)
};

// Parses the ICMP message of a frame parse_frame() refused as unsupported_protocol with protocol
// ICMP (IPv4) or ICMPv6 (IPv6); `outer` is what parse_frame() filled (it fills the L3 fields before
// refusing the protocol).
IcmpParse parse_icmp_error(ConstFrameBytes frame, const ParsedPacket& outer, IcmpError& e) noexcept;

// The NAT translation of an error: the quoted datagram's `quoted_side` endpoint becomes
// (address, port) (IPv4 quoted header checksum and, when quoted and not 0, the quoted UDP
// checksum updated incrementally), the outer header's `outer_side` address becomes
// `outer_address` (IPv4 header checksum updated), and the ICMP checksum is made right for the
// result (ICMPv6's covers the pseudo-header; a checksum that was wrong on arrival stays exactly
// as wrong: every checksum is updated incrementally, RFC 1624). `outer` and `e` are kept in step;
// outer's ports become 0 and its payload the quote (after the ICMP header), so that route()'s
// frame_matches() takes it. `e` and `outer` come from a successful parse_icmp_error() of `frame`.
void translate_icmp_error(FrameBytes frame, ParsedPacket& outer, IcmpError& e, Side quoted_side,
                          const std::array<std::uint8_t, 16>& address, std::uint16_t port,
                          Side outer_side,
                          const std::array<std::uint8_t, 16>& outer_address) noexcept;

// What an error built by the gateway says.
struct IcmpReason {
  std::uint8_t type = 0;  // kIcmpTimeExceeded / kIcmpDestinationUnreachable, or the v6 types
  std::uint8_t code = 0;
  std::uint32_t mtu = 0;  // fragmentation needed / packet too big: the next link's MTU
};

// The largest error the builders write: IPv4 576 bytes of IP (RFC 1812 4.3.2.3), IPv6 1280 (RFC
// 4443 2.4(c)), plus the L2 header.
inline constexpr std::uint32_t kIcmpErrorMaxIpBytes4 = 576;
inline constexpr std::uint32_t kIcmpErrorMaxIpBytes6 = 1280;

// Turns the packet in `frame` (parsed as p: a UDP packet, a fragment, or any IPv4/IPv6 packet
// whose L3 fields p holds) into an error about it, in place: the L2 header is kept as it is (the
// caller routes the result and writes the MACs), then a new IP header (from `source` to the
// packet's source, TTL / hop limit 64, IPv4 DF clear, a fresh identification `ip_id`), the ICMP
// header (with the MTU for fragmentation needed / packet too big, ICMPv4's capped at 65535; the
// second word is zero for other errors) and as much of the packet from its IP header on as fits
// the limits above and `frame`, checksums computed. The IPv4 header has TOS 0xc0 (as Linux's
// icmp_send()), the IPv6 one traffic class and flow label 0. `frame` may be longer than the
// packet (it is the room up to the end of its UMEM frame). Returns the new frame length, or 0 when
// `frame` is too short for the smallest error, one quoting the packet's IP header(s) and 8 bytes
// more (or all of a shorter packet), or does not hold what p describes (nothing is changed then). p
// is refilled for the result (protocol ICMP / ICMPv6, src = source, dst = the old source, hop limit
// 64, ports 0, payload = the quote after the ICMP header, so that route() takes it).
std::uint32_t build_icmp_error(FrameBytes frame, ParsedPacket& p, const IcmpReason& reason,
                               const std::array<std::uint8_t, 16>& source,
                               std::uint16_t ip_id) noexcept;

}  // namespace ferry::packet
