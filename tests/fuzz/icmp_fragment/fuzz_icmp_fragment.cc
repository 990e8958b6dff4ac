// libFuzzer target for the IP-hop part of lib/packet: any bytes go through parse_frame() and then
// parse_fragment() / parse_icmp_error(); what parses is translated (translate_icmp_error), cut
// (fragment_ipv4), rewritten (the fragment DNAT) and answered (build_icmp_error), each on its own
// exactly sized copy so ASan sees any byte read or written outside, and the results are checked:
// checksums verify after iff they did before, pieces put back together are the packet, and a
// built error parses back as an error quoting the packet. Built and run by `make fuzz`.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/packet/checksum.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/icmp.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/rewrite.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::packet;
using Bytes = std::vector<std::uint8_t>;
using Address = std::array<std::uint8_t, 16>;

const Address kVip4 = {10, 0, 0, 10};
const Address kVip6 = {0x20, 0x01, 0x0d, 0xb8, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10};
const Address kGateway4 = {198, 51, 100, 1};
const Address kGateway6 = {0x20, 0x01, 0x0d, 0xb8, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

// A ones'-complement sum over what a checksum covers, the checksum included, verifies when it
// folds to 0xffff; unlike comparing with a recomputed value, this takes either zero (0x0000 and
// 0xffff) in the checksum field, as receivers do.
bool verifies(std::uint64_t sum) {
  return fold_checksum(sum) == 0xffff;
}

bool ipv4_header_verifies(const Bytes& f, std::uint32_t at, std::uint32_t header_bytes) {
  return verifies(ones_complement_add(0, {f.data() + at, header_bytes}));
}

bool icmp_verifies(const Bytes& f, const ParsedPacket& outer, const IcmpError& e) {
  std::uint64_t sum = ones_complement_add(0, {f.data() + e.icmp_offset, e.icmp_bytes});
  if (!outer.is_v4()) {
    sum = ones_complement_add(sum, {f.data() + outer.src_address_offset(), 32});
    sum += e.icmp_bytes + IPPROTO_ICMPV6;
  }
  return verifies(sum);
}

// The quoted datagram's UDP checksum, when the whole datagram is quoted and it has one:
// 1 verifies, 0 does not, -1 cannot tell.
int quoted_udp_verifies(const Bytes& f, const ParsedPacket& outer, const IcmpError& e) {
  const std::uint8_t* udp = f.data() + e.quoted_l4_offset;
  std::uint32_t udp_length = load_be16(udp + 4);
  if (load_be16(udp + 6) == 0 || udp_length < 8 || udp_length > e.quoted_l4_bytes) return -1;
  std::uint32_t n = outer.address_bytes();
  std::uint32_t addresses_at = e.quoted_l3_offset + (outer.is_v4() ? 12 : 8);
  std::uint64_t sum = ones_complement_add(0, {f.data() + addresses_at, 2 * n});
  sum += IPPROTO_UDP + udp_length;
  return verifies(ones_complement_add(sum, {udp, udp_length})) ? 1 : 0;
}

struct IcmpState {
  bool icmp = false;
  bool outer_ipv4 = true;
  bool quoted_ipv4 = true;
  int quoted_udp = -1;
};

IcmpState icmp_state(const Bytes& f, const ParsedPacket& outer, const IcmpError& e) {
  IcmpState s;
  s.icmp = icmp_verifies(f, outer, e);
  if (outer.is_v4()) {
    s.outer_ipv4 = ipv4_header_verifies(f, outer.l3_offset, outer.l4_offset - outer.l3_offset);
    s.quoted_ipv4 = ipv4_header_verifies(f, e.quoted_l3_offset, e.quoted_l3_header_bytes);
  }
  s.quoted_udp = quoted_udp_verifies(f, outer, e);
  return s;
}

// The NAT translation, both ways a NAT does it, on a copy; then the same frame parses to the same
// error with the new endpoints, and every checksum verifies iff it did.
void check_translate(const Bytes& original, const ParsedPacket& outer, const IcmpError& e,
                     std::uint8_t choice) {
  Bytes f = original;
  ParsedPacket o = outer;
  IcmpError t = e;
  const IcmpState before = icmp_state(f, o, t);
  Side quoted_side = choice & 1 ? Side::source : Side::destination;
  Side outer_side = choice & 2 ? Side::source : Side::destination;
  const Address& vip = o.is_v4() ? kVip4 : kVip6;
  std::uint16_t port = static_cast<std::uint16_t>(choice * 257u);
  std::uint16_t old_udp_checksum = load_be16(f.data() + e.quoted_l4_offset + 6);
  translate_icmp_error(f, o, t, quoted_side, vip, port, outer_side, vip);
  FUZZ_CHECK(f.size() == original.size());
  FUZZ_CHECK(frame_matches(f, o));

  ParsedPacket again;
  IcmpError e2;
  FUZZ_CHECK(parse_frame(f, again) == ParseError::unsupported_protocol);
  FUZZ_CHECK(parse_icmp_error(f, again, e2) == IcmpParse::error);
  FUZZ_CHECK(again.src_address == o.src_address && again.dst_address == o.dst_address);
  FUZZ_CHECK(e2.quoted_src == t.quoted_src && e2.quoted_dst == t.quoted_dst);
  FUZZ_CHECK(e2.quoted_src_port == t.quoted_src_port && e2.quoted_dst_port == t.quoted_dst_port);
  FUZZ_CHECK((quoted_side == Side::source ? t.quoted_src : t.quoted_dst) == vip);
  FUZZ_CHECK((quoted_side == Side::source ? t.quoted_src_port : t.quoted_dst_port) == port);
  FUZZ_CHECK(e2.quoted_l4_offset == e.quoted_l4_offset && e2.quoted_l4_bytes == e.quoted_l4_bytes);
  // Nothing but the fields the translation owns has moved.
  std::uint32_t changed = 0;
  for (std::size_t i = 0; i < f.size(); ++i) changed += f[i] != original[i];
  FUZZ_CHECK(changed <= 2 * 16 + 2 + 2 + 2 + 2 + 2);

  const IcmpState after = icmp_state(f, again, e2);
  FUZZ_CHECK(after.icmp == before.icmp);
  FUZZ_CHECK(after.outer_ipv4 == before.outer_ipv4);
  FUZZ_CHECK(after.quoted_ipv4 == before.quoted_ipv4);
  if (old_udp_checksum == 0) {
    FUZZ_CHECK(load_be16(f.data() + e.quoted_l4_offset + 6) == 0);
  } else {
    FUZZ_CHECK(after.quoted_udp == before.quoted_udp);
  }
}

// Builds an error about the packet p describes in a copy of `original` with `extra` bytes of room
// after it: nothing changes when it does not fit; when it does, it parses back as an error from
// the gateway to the packet's source quoting the packet's first bytes.
void check_build(const Bytes& original, const ParsedPacket& p, std::size_t extra,
                 bool quotes_udp_ports) {
  Bytes f = original;
  f.resize(original.size() + extra, 0xee);
  const Bytes before = f;
  ParsedPacket q = p;
  bool v4 = p.is_v4();
  IcmpReason reason = v4 ? IcmpReason{kIcmpDestinationUnreachable, kIcmpFragmentationNeeded, 1400}
                         : IcmpReason{kIcmp6PacketTooBig, 0, 1280};
  std::uint32_t length = build_icmp_error(f, q, reason, v4 ? kGateway4 : kGateway6, 0x4242);
  if (length == 0) {
    FUZZ_CHECK(f == before);
    return;
  }
  FUZZ_CHECK(length <= f.size());
  FUZZ_CHECK(length <= p.l3_offset + (v4 ? kIcmpErrorMaxIpBytes4 : kIcmpErrorMaxIpBytes6));
  FUZZ_CHECK(std::equal(f.begin(), f.begin() + p.l3_offset, before.begin()));
  f.resize(length);
  FUZZ_CHECK(frame_matches(f, q));
  ParsedPacket outer;
  FUZZ_CHECK(parse_frame(f, outer) == ParseError::unsupported_protocol);
  FUZZ_CHECK(outer.l3_offset == p.l3_offset && outer.l4_offset == q.l4_offset);
  FUZZ_CHECK(outer.src_address == q.src_address && outer.dst_address == p.src_address);
  FUZZ_CHECK(outer.dst_address == q.dst_address && outer.protocol == q.protocol);
  if (v4) FUZZ_CHECK(ipv4_header_verifies(f, outer.l3_offset, 20));
  std::uint32_t quoted = length - (outer.l4_offset + kIcmpHeaderBytes);
  FUZZ_CHECK(std::equal(f.begin() + outer.l4_offset + kIcmpHeaderBytes, f.end(),
                        original.begin() + p.l3_offset));
  FUZZ_CHECK(quoted >= std::min(p.l3_bytes, p.l4_offset - p.l3_offset + 8));
  IcmpError e;
  IcmpParse r = parse_icmp_error(f, outer, e);
  if (!quotes_udp_ports) return;
  FUZZ_CHECK(r == IcmpParse::error);
  FUZZ_CHECK(icmp_verifies(f, outer, e));
  FUZZ_CHECK(e.quoted_src == p.src_address && e.quoted_dst == p.dst_address);
  FUZZ_CHECK(e.quoted_src_port == p.src_port && e.quoted_dst_port == p.dst_port);
}

// Cuts the IPv4 packet or fragment p describes at `mtu` into exactly sized buffers: the pieces
// are fragments of the same datagram, in order, whose data put together is the packet's.
void check_fragment_ipv4(const Bytes& original, const ParsedPacket& p, std::uint32_t mtu) {
  std::uint32_t count = ipv4_fragment_count(p, mtu);
  if (count == 0) return;
  FUZZ_CHECK(count <= 65536 / 8);
  Bytes frame = original;
  std::vector<Bytes> buffers(count - 1, Bytes(original.size()));
  std::vector<FrameBytes> more(buffers.begin(), buffers.end());
  std::vector<std::uint32_t> lengths(count);
  const std::uint8_t* ip = original.data() + p.l3_offset;
  std::uint16_t flags_offset = load_be16(ip + 6);
  bool done = fragment_ipv4(frame, p, mtu, more, lengths);
  if (!done) {
    FUZZ_CHECK(count > 1 && (flags_offset & 0x4000) != 0 && frame == original);
    return;
  }
  if (count == 1) {
    FUZZ_CHECK(frame == original && lengths[0] == p.l3_offset + p.l3_bytes);
    return;
  }
  std::uint32_t header_bytes = p.l4_offset - p.l3_offset;
  std::uint32_t offset = (flags_offset & 0x1fff) * 8u;
  Bytes data;
  for (std::uint32_t i = 0; i < count; ++i) {
    Bytes piece = i == 0 ? frame : buffers[i - 1];
    FUZZ_CHECK(lengths[i] <= piece.size());
    piece.resize(lengths[i]);
    FUZZ_CHECK(lengths[i] - p.l3_offset <= mtu);
    FUZZ_CHECK(std::equal(piece.begin(), piece.begin() + p.l3_offset, original.begin()));
    FUZZ_CHECK(ipv4_header_verifies(piece, p.l3_offset, header_bytes));
    ParsedPacket q;
    Fragment f;
    FragmentParse r = parse_fragment(piece, q, f);
    if (p.protocol != IPPROTO_UDP) {
      FUZZ_CHECK(r == FragmentParse::not_udp);
    } else {
      FUZZ_CHECK(r == FragmentParse::fragment);
      FUZZ_CHECK(f.offset_bytes == offset);
      FUZZ_CHECK(f.more == (i + 1 < count || (flags_offset & 0x2000) != 0));
      if (f.first()) FUZZ_CHECK(q.src_port == p.src_port && q.dst_port == p.dst_port);
    }
    offset += lengths[i] - p.l3_offset - header_bytes;
    data.insert(data.end(), piece.begin() + p.l3_offset + header_bytes, piece.end());
  }
  FUZZ_CHECK(std::equal(data.begin(), data.end(), original.begin() + p.l4_offset,
                        original.begin() + p.l4_offset + p.l4_bytes) &&
             data.size() == p.l4_bytes);
}

// A fragment as parse_fragment() describes it, and the DNAT of it (rewrite_endpoint on the first,
// rewrite_address on the others): the IPv4 header verifies iff it did and the frame parses to the
// same fragment with the new destination.
void check_fragment(const Bytes& original, const ParsedPacket& p, const Fragment& f) {
  FUZZ_CHECK(frame_matches(original, p));
  FUZZ_CHECK(f.end_bytes() <= 65535 && f.data_bytes == p.l4_bytes);
  FUZZ_CHECK(!f.more || f.data_bytes % 8 == 0);
  FUZZ_CHECK(p.fragment_tail == !f.first());
  FUZZ_CHECK(f.first() ? p.payload_offset == p.l4_offset + 8 && f.data_bytes >= 8
                       : p.payload_offset == p.l4_offset && p.src_port == 0);
  Bytes frame = original;
  ParsedPacket q = p;
  const Address& vip = p.is_v4() ? kVip4 : kVip6;
  bool header_was_right =
      !p.is_v4() || ipv4_header_verifies(frame, p.l3_offset, p.l4_offset - p.l3_offset);
  if (f.first()) {
    rewrite_endpoint(frame, q, Side::destination, vip, 5353);
  } else {
    rewrite_address(frame, q, Side::destination, vip);
  }
  if (p.is_v4()) {
    FUZZ_CHECK(ipv4_header_verifies(frame, p.l3_offset, p.l4_offset - p.l3_offset) ==
               header_was_right);
  }
  ParsedPacket again;
  Fragment g;
  FUZZ_CHECK(parse_fragment(frame, again, g) == FragmentParse::fragment);
  FUZZ_CHECK(again.dst_address == vip && again.dst_port == (f.first() ? 5353 : 0));
  FUZZ_CHECK(g.offset_bytes == f.offset_bytes && g.data_bytes == f.data_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Bytes original(data, data + size);
  // The MAC bytes steer the choices: the harness's own "random" without a second input.
  std::uint8_t choice = size > 0 ? data[0] : 0;
  std::uint32_t mtu = size > 2 ? 68 + load_be16(data + 1) % 1433 : 576;
  std::size_t room = choice % 3 == 0 ? 0 : choice % 3 == 1 ? 64 : 1500;

  ParsedPacket p;
  ParseError e = parse_frame(original, p);
  ParsedPacket fp;
  Fragment f;
  FragmentParse fr = parse_fragment(original, fp, f);
  FUZZ_CHECK(fr != FragmentParse::fragment || e == ParseError::ipv4_fragment ||
             e == ParseError::ipv6_extension_header);
  if (fr == FragmentParse::fragment) {
    check_fragment(original, fp, f);
    if (fp.is_v4()) check_fragment_ipv4(original, fp, mtu);
    check_build(original, fp, room, f.first());
  }
  if (e == ParseError::none) {
    if (p.is_v4()) {
      check_fragment_ipv4(original, p, mtu);
      check_fragment_ipv4(original, p, 68);
    }
    check_build(original, p, room, p.protocol == IPPROTO_UDP);
  }
  if (e == ParseError::unsupported_protocol) {
    IcmpError ie;
    IcmpParse r = parse_icmp_error(original, p, ie);
    if (r == IcmpParse::error) {
      FUZZ_CHECK(ie.icmp_offset + std::uint64_t{ie.icmp_bytes} <= size);
      FUZZ_CHECK(ie.quoted_l4_bytes >= 8 &&
                 ie.quoted_l4_offset + std::uint64_t{ie.quoted_l4_bytes} <= size);
      check_translate(original, p, ie, choice);
      // With every checksum made right first, so each input also checks that the incremental
      // updates keep them right.
      Bytes fixed = original;
      if (p.is_v4()) {
        store_be16(
            fixed.data() + ie.quoted_l3_offset + 10,
            ipv4_header_checksum(fixed.data() + ie.quoted_l3_offset, ie.quoted_l3_header_bytes));
        store_be16(fixed.data() + p.l3_offset + 10,
                   ipv4_header_checksum(fixed.data() + p.l3_offset, p.l4_offset - p.l3_offset));
      }
      store_be16(fixed.data() + ie.icmp_offset + 2, 0);
      std::uint64_t sum = ones_complement_add(0, {fixed.data() + ie.icmp_offset, ie.icmp_bytes});
      if (!p.is_v4()) {
        sum = ones_complement_add(sum, {fixed.data() + p.src_address_offset(), 32});
        sum += ie.icmp_bytes + IPPROTO_ICMPV6;
      }
      store_be16(fixed.data() + ie.icmp_offset + 2,
                 static_cast<std::uint16_t>(~fold_checksum(sum)));
      FUZZ_CHECK(icmp_verifies(fixed, p, ie));
      check_translate(fixed, p, ie, static_cast<std::uint8_t>(choice ^ 3));
    }
  }
  if (e == ParseError::unsupported_protocol || e == ParseError::ipv4_fragment ||
      e == ParseError::ipv6_extension_header) {
    check_build(original, p, room, false);  // any packet whose L3 fields parse_frame() filled
  }
  return 0;
}
