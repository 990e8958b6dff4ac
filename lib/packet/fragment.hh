// IP fragments of UDP datagrams: parsing a fragment into the ParsedPacket the actions rewrite,
// and cutting an IPv4 datagram that is too big for the next link into fragments, as a router
// does (RFC 791, RFC 8200 4.5). No reassembly: each fragment is forwarded on its own.
#pragma once

#include <cstdint>
#include <span>

#include "lib/packet/bytes.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

inline constexpr std::uint8_t kIpv6NextHeaderFragment = 44;
inline constexpr std::uint32_t kIpv6FragmentHeaderBytes = 8;

// What the fragment header says (IPv4 flags/offset/id, or the IPv6 Fragment extension header).
struct Fragment {
  std::uint32_t id = 0;            // IPv4: the 16-bit identification; IPv6: the 32-bit one
  std::uint32_t offset_bytes = 0;  // where this fragment's data sits in the datagram (8 x offset)
  std::uint32_t data_bytes = 0;    // this fragment's data: the IP payload after the (extension)
                                   // header; for the first fragment it starts with the UDP header
  bool more = false;               // MF / M: more fragments follow
  bool first() const { return offset_bytes == 0; }
  // The datagram's length, known once the last fragment is seen (!more).
  std::uint32_t end_bytes() const { return offset_bytes + data_bytes; }
};

enum class FragmentParse : std::uint8_t {
  fragment,        // a fragment of a UDP datagram: p and f are filled
  not_a_fragment,  // the frame is not an IP fragment (parse_frame() is the parser for it)
  not_udp,         // a fragment, but the datagram is not UDP (TCP, ...), or an IPv6 fragment
                   // header behind other extension headers: the kernel's
  tiny_first,      // a first fragment too short to hold the whole 8-byte UDP header: drop it
  malformed,       // lengths that do not add up (parse_frame()'s checks, which a frame that is
                   // not a fragment fails too; the IPv6 Fragment header's), a non-last
                   // fragment whose data is not a multiple of 8 bytes, offset + data > 65535, a
                   // later fragment with no data, a first fragment whose UDP length is below 8
};

// Parses a frame that parse_frame() refused as ipv4_fragment, or as ipv6_extension_header with
// next header 44 directly after the fixed header. It runs parse_frame() itself, so p needs no
// filling beforehand (and any frame may be passed: what is not a fragment says so). An IPv6
// atomic fragment (offset 0, M clear, RFC 6946) is a first fragment that is also the last. On
// `fragment`, p is what parse_frame() would fill for a UDP packet with these differences:
//   * p.protocol is IPPROTO_UDP, p.l4_offset is where the fragment's data starts (after the IPv6
//     fragment header: l3_offset + 48), p.l4_bytes = f.data_bytes;
//   * first fragment: p.src_port / p.dst_port from the UDP header, p.payload_offset =
//     p.l4_offset + 8, p.payload_bytes = p.l4_bytes - 8 (the datagram's other bytes are in the
//     other fragments), so rewrite_endpoint() updates addresses, ports and the UDP checksum (which
//     covers the whole datagram: the incremental update keeps it exact);
//   * later fragments: ports 0, p.payload_offset = p.l4_offset, p.payload_bytes = p.l4_bytes, and
//     p.fragment_tail is true: only addresses may be rewritten (rewrite_address()).
// Never reads outside the frame.
FragmentParse parse_fragment(ConstFrameBytes frame, ParsedPacket& p, Fragment& f) noexcept;

// IPv4 with DF clear that does not fit `mtu` (IP bytes) on the egress link: the number of
// fragments it becomes (RFC 791: every fragment but the last carries a multiple of 8 data bytes;
// IP options are copied only when their copy flag is set, the first fragment keeps all). As
// Linux's ip_options_fragment() does, the pieces after the first keep the first one's header
// length, the options not copied overwritten with NOPs: so the count needs only p. 1 when the
// packet fits; 0 when `mtu` is below 68 (RFC 791's minimum) or the packet is not IPv4.
std::uint32_t ipv4_fragment_count(const ParsedPacket& p, std::uint32_t mtu) noexcept;

// Cuts the IPv4 packet in `frame` (parsed as p, or a fragment parsed by parse_fragment(): a
// fragment is cut again with offsets relative to its datagram and MF kept on the last piece when
// it was set) into ipv4_fragment_count() pieces. Piece 0 is written in place in `frame`, which
// shrinks to `lengths[0]`; pieces 1.. are written into `more[i-1]` (each at least as large as
// frame.size()), L2 header copied from `frame`. Every piece gets its own total length, flags,
// offset and IPv4 header checksum; the UDP checksum is left as it is (it covers the datagram).
// Only the total length, flags/offset and header checksum (and in later pieces the options) differ
// from the packet's header: TTL is the caller's. A packet that fits is left as it is (lengths[0]
// is its frame length without Ethernet padding). Returns false, touching nothing, when the sizes
// do not allow it (ipv4_fragment_count() is 0, too few `more` or `lengths`, a `more` buffer too
// small for its piece) or when DF is set (the caller sends fragmentation needed instead).
bool fragment_ipv4(FrameBytes frame, const ParsedPacket& p, std::uint32_t mtu,
                   std::span<const FrameBytes> more, std::span<std::uint32_t> lengths) noexcept;

// True for an IPv4 packet (p parsed from `frame`) with DF set: it may not be cut, too big gets
// fragmentation needed. False for IPv6 and for IPv4 that allows fragmentation.
bool ipv4_dont_fragment(ConstFrameBytes frame, const ParsedPacket& p) noexcept;

// The most pieces the fast path cuts one packet into; one that needs more is refused (too big).
inline constexpr std::uint32_t kMaxFragmentPieces = 64;

}  // namespace ferry::packet
