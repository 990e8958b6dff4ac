// Parses one Ethernet frame (up to 2 VLAN tags, IPv4 or IPv6, UDP or TCP) into offsets and the
// flow tuple, or names why it cannot be handled here. Never reads outside the frame.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <string_view>

#include "lib/common/net.hh"
#include "lib/packet/bytes.hh"

namespace ferry::packet {

// Why a frame was not parsed. Each reason is either malformed (count and drop) or belongs to the
// kernel (see passes_to_kernel()); workers keep one counter per reason.
enum class ParseError : std::uint8_t {
  none = 0,
  truncated_ethernet,     // shorter than the 14-byte Ethernet header
  truncated_vlan,         // a VLAN TPID with fewer than 4 bytes of tag behind it
  too_many_vlans,         // a third VLAN tag; ferry handles untagged, 802.1Q and QinQ
  unsupported_ethertype,  // not IPv4/IPv6 (ARP, LLDP, 802.3 length field...): the kernel's
  truncated_ipv4,         // fewer bytes than the 20-byte header or than IHL says
  bad_ip_version,         // the version nibble does not match the ethertype
  bad_ihl,                // IHL < 5
  bad_ipv4_length,        // total length < header length, or more than the frame holds
  ipv4_fragment,          // MF set or offset != 0: reassembly is the kernel's
  truncated_ipv6,         // fewer than the 40-byte fixed header
  bad_ipv6_length,        // payload length more than the frame holds
  ipv6_extension_header,  // next header is an extension header: the kernel's
  unsupported_protocol,   // neither UDP nor TCP (ICMP, ICMPv6 neighbour discovery...): the kernel's
  truncated_udp,          // the IP payload is shorter than the 8-byte UDP header
  bad_udp_length,         // UDP length < 8 or more than the IP payload
  truncated_tcp,          // the IP payload is shorter than the 20-byte TCP header
  bad_tcp_offset,         // data offset < 5 or past the IP payload
};
inline constexpr std::size_t kParseErrorCount =
    static_cast<std::size_t>(ParseError::bad_tcp_offset) + 1;

// Stable snake_case name, for metrics labels ("reason") and logs.
std::string_view to_string(ParseError e);
// True for frames that are well formed but not ferry's to handle (fragments, extension headers,
// other ethertypes and protocols); false for malformed ones (and for none).
bool passes_to_kernel(ParseError e);

enum class IpVersion : std::uint8_t { v4 = 4, v6 = 6 };

inline constexpr std::uint16_t kEthertypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEthertypeIpv6 = 0x86dd;
inline constexpr std::uint16_t kEthertypeVlan = 0x8100;  // 802.1Q C-tag
inline constexpr std::uint16_t kEthertypeQinQ = 0x88a8;  // 802.1ad S-tag
inline constexpr std::uint32_t kEthernetHeaderBytes = 14;
inline constexpr std::uint32_t kVlanTagBytes = 4;
inline constexpr std::uint32_t kMaxVlanTags = 2;
inline constexpr std::uint32_t kIpv4MinHeaderBytes = 20;
inline constexpr std::uint32_t kIpv6HeaderBytes = 40;
inline constexpr std::uint32_t kUdpHeaderBytes = 8;
inline constexpr std::uint32_t kTcpMinHeaderBytes = 20;

// Where the headers of a parsed frame are, and its flow tuple. Offsets are from the frame start.
// The actions keep the tuple fields in step with the bytes they rewrite.
struct ParsedPacket {
  // Same layout as net::IpAddress::bytes: IPv4 in the first 4 bytes, the rest zero. First and
  // 16-byte aligned, so the 8-byte words the hash and lookups read never straddle a cache line.
  alignas(16) std::array<std::uint8_t, 16> src_address{};
  std::array<std::uint8_t, 16> dst_address{};
  std::uint16_t src_port = 0;  // host byte order
  std::uint16_t dst_port = 0;
  IpVersion version = IpVersion::v4;
  std::uint8_t protocol = 0;                           // IPPROTO_UDP or IPPROTO_TCP
  std::uint8_t hop_limit = 0;                          // IPv4 TTL or IPv6 hop limit
  std::uint8_t vlan_count = 0;                         // 0..2
  std::array<std::uint16_t, kMaxVlanTags> vlan_ids{};  // 12-bit VIDs, outermost first
  std::uint16_t ethertype = 0;       // innermost: kEthertypeIpv4 or kEthertypeIpv6
  std::uint32_t frame_bytes = 0;     // the frame as received, Ethernet padding included
  std::uint32_t l3_offset = 0;       // = L2 header bytes: 14 + 4 per VLAN tag
  std::uint32_t l3_bytes = 0;        // IPv4 total length, or 40 + IPv6 payload length
  std::uint32_t l4_offset = 0;       // after IPv4 options, or after the IPv6 fixed header
  std::uint32_t l4_bytes = 0;        // l3_bytes minus the IP header
  std::uint32_t payload_offset = 0;  // after the UDP header or the TCP header with options
  std::uint32_t payload_bytes = 0;   // UDP: length field - 8; TCP: l4_bytes - header
  // A fragment of a datagram after its first one (parse_fragment()): no transport header, so
  // only addresses may be rewritten.
  bool fragment_tail = false;

  bool is_v4() const { return version == IpVersion::v4; }
  std::uint32_t address_bytes() const { return is_v4() ? 4 : 16; }
  // Offsets of the fields the actions rewrite.
  std::uint32_t src_address_offset() const { return l3_offset + (is_v4() ? 12 : 8); }
  std::uint32_t dst_address_offset() const { return l3_offset + (is_v4() ? 16 : 24); }
  std::uint32_t l4_checksum_offset() const {
    return l4_offset + (protocol == IPPROTO_UDP ? 6 : 16);
  }
  net::IpAddress source_ip() const { return {is_v4() ? AF_INET : AF_INET6, src_address}; }
  net::IpAddress destination_ip() const { return {is_v4() ? AF_INET : AF_INET6, dst_address}; }
};

// Fills `out` and returns ParseError::none, or returns why not (out is then partly filled and must
// not be used). Checks every length field against the frame, so the actions need not. For
// ipv4_fragment, ipv6_extension_header and unsupported_protocol the L3 fields (version, addresses,
// hop limit, protocol, l3/l4 offsets and lengths) are filled: parse_fragment() and
// parse_icmp_error() start from them.
ParseError parse_frame(ConstFrameBytes frame, ParsedPacket& out) noexcept;

}  // namespace ferry::packet
