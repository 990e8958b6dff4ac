// IP fragments of UDP datagrams: parse_fragment() and the RFC 791 cut of fragment_ipv4().
#include "lib/packet/fragment.hh"

#include <algorithm>
#include <cstring>

#include "lib/packet/checksum.hh"

namespace ferry::packet {
namespace {

constexpr std::uint32_t kMaxDatagramBytes = 65535;
constexpr std::uint32_t kIpv4MaxHeaderBytes = 60;
constexpr std::uint32_t kIpv4MinMtu = 68;  // RFC 791: a 60-byte header and 8 bytes of data
constexpr std::uint16_t kIpv4DontFragment = 0x4000;
constexpr std::uint16_t kIpv4MoreFragments = 0x2000;
constexpr std::uint16_t kIpv4OffsetMask = 0x1fff;
constexpr std::uint8_t kIpOptionEnd = 0;
constexpr std::uint8_t kIpOptionNop = 1;
constexpr std::uint8_t kIpOptionCopied = 0x80;

// Extension headers of the RFC 8200 generic shape (next header, length in 8-byte units beyond the
// first 8): the ones a Fragment header may sit behind in the order RFC 8200 4.1 recommends.
bool is_generic_ipv6_extension(std::uint8_t next) {
  return next == 0 || next == 43 || next == 60;  // hop-by-hop, routing, destination options
}

// True when a Fragment header follows other extension headers: a fragment, but not one this
// parser takes (it would have to carry the headers before it into every rewrite).
bool ipv6_fragment_behind_extensions(const std::uint8_t* frame, const ParsedPacket& p) {
  std::uint8_t next = p.protocol;
  std::uint32_t at = p.l4_offset;
  std::uint32_t end = p.l4_offset + p.l4_bytes;
  for (int hops = 0; hops < 8 && is_generic_ipv6_extension(next); ++hops) {
    if (end - at < 8) return false;
    std::uint32_t length = (frame[at + 1] + 1u) * 8u;
    if (end - at < length) return false;
    next = frame[at];
    at += length;
  }
  return next == kIpv6NextHeaderFragment;
}

// The checks both versions share, once `f` says where the fragment sits, and the fill of p.
FragmentParse finish_fragment(const std::uint8_t* frame, ParsedPacket& p, Fragment& f) {
  if (f.first() && f.data_bytes < kUdpHeaderBytes) return FragmentParse::tiny_first;
  if (f.more && f.data_bytes % 8 != 0) return FragmentParse::malformed;
  // An empty later fragment adds nothing to any datagram; Linux discards it too.
  if (!f.first() && f.data_bytes == 0) return FragmentParse::malformed;
  if (f.end_bytes() > kMaxDatagramBytes) return FragmentParse::malformed;
  p.protocol = IPPROTO_UDP;
  p.l4_bytes = f.data_bytes;
  if (!f.first()) {
    p.src_port = p.dst_port = 0;
    p.payload_offset = p.l4_offset;
    p.payload_bytes = p.l4_bytes;
    p.fragment_tail = true;
    return FragmentParse::fragment;
  }
  const std::uint8_t* udp = frame + p.l4_offset;
  // The UDP length is the whole datagram's, mostly beyond this fragment: only its floor is known.
  if (load_be16(udp + 4) < kUdpHeaderBytes) return FragmentParse::malformed;
  p.src_port = load_be16(udp);
  p.dst_port = load_be16(udp + 2);
  p.payload_offset = p.l4_offset + kUdpHeaderBytes;
  p.payload_bytes = p.l4_bytes - kUdpHeaderBytes;
  p.fragment_tail = false;
  return FragmentParse::fragment;
}

}  // namespace

FragmentParse parse_fragment(ConstFrameBytes frame, ParsedPacket& p, Fragment& f) noexcept {
  // parse_frame() does the L2 and L3 length checks; what it refuses as a fragment it has filled.
  ParseError e = parse_frame(frame, p);
  const std::uint8_t* bytes = frame.data();
  f = Fragment{};
  if (e == ParseError::ipv4_fragment) {
    if (p.protocol != IPPROTO_UDP) return FragmentParse::not_udp;
    const std::uint8_t* ip = bytes + p.l3_offset;
    std::uint16_t flags_offset = load_be16(ip + 6);
    f.id = load_be16(ip + 4);
    f.offset_bytes = (flags_offset & kIpv4OffsetMask) * 8u;
    f.more = (flags_offset & kIpv4MoreFragments) != 0;
    f.data_bytes = p.l4_bytes;
    return finish_fragment(bytes, p, f);
  }
  if (e != ParseError::ipv6_extension_header) {
    // Lengths that do not add up are malformed whatever the frame is, a fragment included.
    return e == ParseError::none || passes_to_kernel(e) ? FragmentParse::not_a_fragment
                                                        : FragmentParse::malformed;
  }
  if (p.protocol != kIpv6NextHeaderFragment) {
    return ipv6_fragment_behind_extensions(bytes, p) ? FragmentParse::not_udp
                                                     : FragmentParse::not_a_fragment;
  }
  if (p.l4_bytes < kIpv6FragmentHeaderBytes) return FragmentParse::malformed;
  const std::uint8_t* header = bytes + p.l4_offset;
  if (header[0] != IPPROTO_UDP) return FragmentParse::not_udp;
  std::uint16_t offset_flags = load_be16(header + 2);
  f.id = load_be32(header + 4);
  f.offset_bytes = offset_flags & 0xfff8u;  // 13 bits of 8-byte units, already in place
  f.more = (offset_flags & 1) != 0;
  f.data_bytes = p.l4_bytes - kIpv6FragmentHeaderBytes;
  p.l4_offset += kIpv6FragmentHeaderBytes;
  return finish_fragment(bytes, p, f);
}

namespace {

// The data bytes each piece but the last carries: all that fits after the header, in 8s. Every
// piece keeps the first one's header length (see fragment.hh), so this is one number.
std::uint32_t piece_data_bytes(const ParsedPacket& p, std::uint32_t mtu) {
  return (mtu - (p.l4_offset - p.l3_offset)) & ~7u;
}

// Overwrites with NOPs the options of `header` whose copy flag is clear (RFC 791 3.1), as Linux's
// ip_options_fragment() does for the fragments after the first: the header keeps its length. An
// option list that does not parse is NOPs from where it stops making sense.
void strip_uncopied_options(std::uint8_t* header, std::uint32_t header_bytes) {
  std::uint32_t at = kIpv4MinHeaderBytes;
  while (at < header_bytes) {
    std::uint8_t type = header[at];
    if (type == kIpOptionEnd) return;  // what follows is padding
    if (type == kIpOptionNop) {
      ++at;
      continue;
    }
    std::uint32_t length = at + 1 < header_bytes ? header[at + 1] : 0;
    if (length < 2 || length > header_bytes - at) {
      std::memset(header + at, kIpOptionNop, header_bytes - at);
      return;
    }
    if ((type & kIpOptionCopied) == 0) std::memset(header + at, kIpOptionNop, length);
    at += length;
  }
}

void finish_piece(std::uint8_t* ip, std::uint32_t header_bytes, std::uint32_t data_bytes,
                  std::uint32_t offset_bytes, bool more) {
  store_be16(ip + 2, static_cast<std::uint16_t>(header_bytes + data_bytes));
  store_be16(ip + 6,
             static_cast<std::uint16_t>((offset_bytes / 8) | (more ? kIpv4MoreFragments : 0)));
  store_be16(ip + 10, ipv4_header_checksum(ip, header_bytes));
}

}  // namespace

std::uint32_t ipv4_fragment_count(const ParsedPacket& p, std::uint32_t mtu) noexcept {
  std::uint32_t header_bytes = p.l4_offset - p.l3_offset;
  if (!p.is_v4() || mtu < kIpv4MinMtu) return 0;
  if (header_bytes < kIpv4MinHeaderBytes || header_bytes > kIpv4MaxHeaderBytes) return 0;
  if (p.l3_bytes <= mtu) return 1;
  std::uint32_t per_piece = piece_data_bytes(p, mtu);  // >= 8: mtu >= 68, header <= 60
  return (p.l4_bytes + per_piece - 1) / per_piece;
}

bool ipv4_dont_fragment(ConstFrameBytes frame, const ParsedPacket& p) noexcept {
  return p.is_v4() && (load_be16(frame.data() + p.l3_offset + 6) & kIpv4DontFragment) != 0;
}

bool fragment_ipv4(FrameBytes frame, const ParsedPacket& p, std::uint32_t mtu,
                   std::span<const FrameBytes> more, std::span<std::uint32_t> lengths) noexcept {
  std::uint32_t count = ipv4_fragment_count(p, mtu);
  std::uint32_t header_bytes = p.l4_offset - p.l3_offset;
  if (count == 0 || lengths.size() < count || more.size() < count - 1) return false;
  if (header_bytes + p.l4_bytes != p.l3_bytes ||
      frame.size() < p.l3_offset + std::uint64_t{p.l3_bytes}) {
    return false;
  }
  if (count == 1) {
    lengths[0] = p.l3_offset + p.l3_bytes;
    return true;
  }
  std::uint8_t* ip = frame.data() + p.l3_offset;
  if (ipv4_dont_fragment(frame, p)) return false;  // the caller's: fragmentation needed
  std::uint16_t flags_offset = load_be16(ip + 6);
  std::uint32_t per_piece = piece_data_bytes(p, mtu);
  std::uint32_t piece_frame_bytes = p.l3_offset + header_bytes + per_piece;
  for (std::uint32_t i = 1; i < count; ++i) {
    if (more[i - 1].size() < piece_frame_bytes) return false;
  }

  // A fragment is cut again within its place in the datagram; its MF goes to its last piece.
  std::uint32_t datagram_offset = (flags_offset & kIpv4OffsetMask) * 8u;
  bool last_has_more = (flags_offset & kIpv4MoreFragments) != 0;
  const std::uint8_t* data = ip + header_bytes;
  for (std::uint32_t i = 1; i < count; ++i) {
    std::uint8_t* piece = more[i - 1].data();
    std::uint32_t at = i * per_piece;
    std::uint32_t piece_bytes = std::min(per_piece, p.l4_bytes - at);
    bool last = i == count - 1;
    std::memcpy(piece, frame.data(), p.l3_offset + header_bytes);
    std::uint8_t* piece_ip = piece + p.l3_offset;
    strip_uncopied_options(piece_ip, header_bytes);
    std::memcpy(piece_ip + header_bytes, data + at, piece_bytes);
    finish_piece(piece_ip, header_bytes, piece_bytes, datagram_offset + at,
                 last ? last_has_more : true);
    lengths[i] = p.l3_offset + header_bytes + piece_bytes;
  }
  // Piece 0 is the frame itself, its data already in place; it keeps every option.
  finish_piece(ip, header_bytes, per_piece, datagram_offset, true);
  lengths[0] = piece_frame_bytes;
  return true;
}

}  // namespace ferry::packet
