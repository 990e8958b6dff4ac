// build_icmp_error(): the gateway's own errors against scapy's bytes, field by field for the
// truncated ones, every checksum recomputed from scratch, and each result parsed back as an error
// quoting the original datagram.
#include <gtest/gtest.h>

#include "lib/packet/checksum.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/icmp.hh"
#include "tests/unit/packet/ip_hop_builder.hh"
#include "tests/unit/packet/ip_hop_vectors.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::build_frame;
using test::Bytes;
using test::FrameSpec;
using test::stored16;

const std::array<std::uint8_t, 16> kGateway4 = addr("198.51.100.1");
const std::array<std::uint8_t, 16> kGateway6 = addr("2001:db8:ff::1");
constexpr std::size_t kUmemFrameBytes = 2048;

struct Built {
  Bytes frame;  // trimmed to the returned length
  std::uint32_t length = 0;
  ParsedPacket p;  // as build_icmp_error() refilled it
};

// Builds the error in a UMEM-sized buffer holding `original` at its start.
Built build(const Bytes& original, const IcmpReason& reason, std::size_t room = kUmemFrameBytes) {
  Built b;
  b.frame = original;
  b.frame.resize(room, 0xee);
  EXPECT_EQ(parse_frame(original, b.p), ParseError::none);
  b.length = build_icmp_error(b.frame, b.p, reason, b.p.is_v4() ? kGateway4 : kGateway6, 0x0101);
  b.frame.resize(b.length);
  return b;
}

// The result parses back as an error from the gateway to the sender, quoting `original`'s first
// bytes and its addresses and ports; every checksum is recomputed from scratch.
void expect_error_about(const Built& b, const Bytes& original, std::uint8_t type) {
  const Bytes& f = b.frame;
  ParsedPacket outer, sent;
  ASSERT_EQ(parse_frame(original, sent), ParseError::none);
  ASSERT_EQ(parse_frame(f, outer), ParseError::unsupported_protocol);
  IcmpError e;
  ASSERT_EQ(parse_icmp_error(f, outer, e), IcmpParse::error);
  EXPECT_EQ(e.type, type);
  bool v4 = outer.is_v4();
  EXPECT_EQ(outer.src_address, v4 ? kGateway4 : kGateway6);
  EXPECT_EQ(outer.dst_address, sent.src_address);
  EXPECT_EQ(outer.hop_limit, 64);
  EXPECT_EQ(e.quoted_src, sent.src_address);
  EXPECT_EQ(e.quoted_dst, sent.dst_address);
  EXPECT_EQ(e.quoted_src_port, sent.src_port);
  EXPECT_EQ(e.quoted_dst_port, sent.dst_port);
  std::size_t quoted = e.icmp_bytes - 8;
  EXPECT_EQ(test::slice(f, e.quoted_l3_offset, quoted),
            test::slice(original, sent.l3_offset, quoted));
  if (v4) {
    EXPECT_EQ(stored16(f, outer.l3_offset + 10),
              test::reference_ipv4_checksum(f, outer.l3_offset, 20));
    EXPECT_EQ(stored16(f, outer.l3_offset + 10),
              ipv4_header_checksum(f.data() + outer.l3_offset, 20));
  }
  EXPECT_EQ(test::reference_icmp_sum(f, outer.l3_offset, e.icmp_offset, e.icmp_bytes, v4), 0xffff);
  // p refilled in step with the bytes.
  EXPECT_EQ(b.p.protocol, outer.protocol);
  EXPECT_EQ(b.p.src_address, outer.src_address);
  EXPECT_EQ(b.p.dst_address, outer.dst_address);
  EXPECT_EQ(b.p.l3_bytes, outer.l3_bytes);
  EXPECT_EQ(b.p.l4_offset, outer.l4_offset);
  EXPECT_EQ(b.p.l4_bytes, outer.l4_bytes);
  EXPECT_EQ(b.p.hop_limit, 64);
  EXPECT_EQ(b.p.src_port, 0);
  EXPECT_EQ(b.p.frame_bytes, b.length);
  EXPECT_TRUE(frame_matches(f, b.p));  // route() takes it
}

TEST(BuildIcmpError, Ipv4TimeExceededIsScapys) {
  Built b = build(test::kUdp4Ttl1, {.type = kIcmpTimeExceeded, .code = 0});
  EXPECT_EQ(b.length, 14u + 20u + 8u + 60u);
  EXPECT_EQ(b.frame, test::kUdp4Ttl1TimeExceeded);
  expect_error_about(b, test::kUdp4Ttl1, kIcmpTimeExceeded);
}

TEST(BuildIcmpError, Ipv6TimeExceededIsScapys) {
  Built b = build(test::kUdp6Hlim1, {.type = kIcmp6TimeExceeded, .code = 0});
  EXPECT_EQ(b.length, 14u + 40u + 8u + 80u);
  EXPECT_EQ(b.frame, test::kUdp6Hlim1TimeExceeded);
  expect_error_about(b, test::kUdp6Hlim1, kIcmp6TimeExceeded);
}

// RFC 1191: fragmentation needed carries the next hop's MTU; RFC 1812 4.3.2.3: the error is at
// most 576 bytes of IP, so a 1,450-byte datagram is quoted for its first 548 bytes.
TEST(BuildIcmpError, FragmentationNeededQuotes576BytesOfIp) {
  FrameSpec s;
  s.payload.resize(1450 - 28);
  for (std::size_t i = 0; i < s.payload.size(); ++i) s.payload[i] = static_cast<std::uint8_t>(i);
  Bytes original = build_frame(s).bytes;
  test::put16(original, 14 + 6, 0x4000);  // DF
  test::fix_ipv4_checksum(original, 14);
  Built b =
      build(original,
            {.type = kIcmpDestinationUnreachable, .code = kIcmpFragmentationNeeded, .mtu = 1400});
  const Bytes& f = b.frame;
  ASSERT_EQ(b.length, 14u + 576u);
  EXPECT_EQ(test::slice(f, 0, 14), test::slice(original, 0, 14));  // L2 kept
  EXPECT_EQ(f[14], 0x45);
  EXPECT_EQ(f[15], 0xc0);
  EXPECT_EQ(stored16(f, 16), 576);
  EXPECT_EQ(stored16(f, 18), 0x0101);
  EXPECT_EQ(stored16(f, 20), 0);  // no DF, no fragment
  EXPECT_EQ(f[22], 64);
  EXPECT_EQ(f[23], IPPROTO_ICMP);
  EXPECT_EQ(test::slice(f, 26, 4), (Bytes{198, 51, 100, 1}));      // from the gateway
  EXPECT_EQ(test::slice(f, 30, 4), test::slice(original, 26, 4));  // to the sender
  EXPECT_EQ(f[34], 3);
  EXPECT_EQ(f[35], 4);
  EXPECT_EQ(stored16(f, 38), 0);     // unused
  EXPECT_EQ(stored16(f, 40), 1400);  // next-hop MTU
  EXPECT_EQ(test::slice(f, 42, 548), test::slice(original, 14, 548));
  expect_error_about(b, original, kIcmpDestinationUnreachable);
  ParsedPacket outer;
  IcmpError e;
  parse_frame(f, outer);
  ASSERT_EQ(parse_icmp_error(f, outer, e), IcmpParse::error);
  EXPECT_EQ(e.quoted_l4_bytes, 528u);
  EXPECT_EQ(stored16(f, e.quoted_l3_offset + 2), 1450);  // the quote says how long it was
}

// RFC 4443 2.4(c): at most 1280 bytes; packet too big's MTU is the whole 32-bit word.
TEST(BuildIcmpError, Ipv6PacketTooBigQuotes1280BytesOfIp) {
  FrameSpec s;
  s.version = IpVersion::v6;
  s.src = addr("2001:db8::1");
  s.dst = addr("2001:db8:ffff::10");
  s.payload.resize(1500 - 48);
  for (std::size_t i = 0; i < s.payload.size(); ++i) s.payload[i] = static_cast<std::uint8_t>(~i);
  Bytes original = build_frame(s).bytes;
  Built b = build(original, {.type = kIcmp6PacketTooBig, .code = 0, .mtu = 1400});
  const Bytes& f = b.frame;
  ASSERT_EQ(b.length, 14u + 1280u);
  EXPECT_EQ(stored16(f, 14), 0x6000);  // traffic class and flow label 0
  EXPECT_EQ(stored16(f, 16), 0);
  EXPECT_EQ(stored16(f, 18), 1240);  // payload length
  EXPECT_EQ(f[20], IPPROTO_ICMPV6);
  EXPECT_EQ(f[21], 64);
  EXPECT_EQ(test::slice(f, 22, 16), Bytes(kGateway6.begin(), kGateway6.end()));
  EXPECT_EQ(test::slice(f, 38, 16), test::slice(original, 22, 16));
  EXPECT_EQ(f[54], 2);
  EXPECT_EQ(f[55], 0);
  EXPECT_EQ(test::slice(f, 58, 4), (Bytes{0, 0, 0x05, 0x78}));  // 1400
  EXPECT_EQ(test::slice(f, 62, 1232), test::slice(original, 14, 1232));
  expect_error_about(b, original, kIcmp6PacketTooBig);
}

TEST(BuildIcmpError, OtherErrorsHaveAZeroSecondWord) {
  for (IcmpReason reason : {IcmpReason{.type = 3, .code = 1, .mtu = 1400},
                            IcmpReason{.type = 11, .code = 0, .mtu = 99}}) {
    Built b = build(test::kUdp4Ttl1, reason);
    EXPECT_EQ(test::slice(b.frame, 38, 4), (Bytes{0, 0, 0, 0}));
    expect_error_about(b, test::kUdp4Ttl1, reason.type);
  }
  Built b = build(test::kUdp6Hlim1, {.type = kIcmp6DestinationUnreachable, .code = 3, .mtu = 7});
  EXPECT_EQ(test::slice(b.frame, 58, 4), (Bytes{0, 0, 0, 0}));
  expect_error_about(b, test::kUdp6Hlim1, kIcmp6DestinationUnreachable);
}

// In place, no room past the frame: the smallest error (the IP header and the UDP header quoted)
// still fits a 74-byte IPv4 frame, cut to what there is; a frame too short for it is untouched.
TEST(BuildIcmpError, QuoteShrinksToTheRoomAndNoRoomChangesNothing) {
  Built fits = build(test::kUdp4Ttl1, {.type = kIcmpTimeExceeded}, test::kUdp4Ttl1.size());
  ASSERT_EQ(fits.length, test::kUdp4Ttl1.size());
  expect_error_about(fits, test::kUdp4Ttl1, kIcmpTimeExceeded);
  EXPECT_EQ(stored16(fits.frame, 16), 20 + 8 + 32);

  // Frames shorter than the smallest error (14 + 20 + 8 + 28 bytes; IPv6 14 + 40 + 8 + 48), and
  // a byte more.
  for (const Bytes* original : {&test::kUdp4, &test::kUdp6, &test::kUdp6Hlim1}) {
    ParsedPacket p;
    ASSERT_EQ(parse_frame(*original, p), ParseError::none);
    std::size_t least = p.is_v4() ? 14 + 28 + 28 : 14 + 48 + 48;
    const auto& gateway = p.is_v4() ? kGateway4 : kGateway6;
    Bytes room = *original;
    room.resize(least - 1, 0);
    Bytes before = room;
    ParsedPacket q = p;
    EXPECT_EQ(build_icmp_error(room, q, {.type = 11}, gateway, 1), 0u) << original->size();
    EXPECT_EQ(room, before);
    EXPECT_EQ(q.l4_offset, p.l4_offset);
    room.resize(least, 0);
    EXPECT_EQ(build_icmp_error(room, q, {.type = 11}, gateway, 1), least);
  }
  // A p that does not describe the frame it is given: the packet is longer than the frame.
  ParsedPacket p;
  ASSERT_EQ(parse_frame(test::kUdp4Ttl1, p), ParseError::none);
  Bytes shorter(test::kUdp4Ttl1.begin(), test::kUdp4Ttl1.begin() + 73);
  EXPECT_EQ(build_icmp_error(shorter, p, {.type = 11}, kGateway4, 1), 0u);
}

TEST(BuildIcmpError, VlanTagsAndIpv4OptionsAreKept) {
  FrameSpec s;
  s.vlan_tpids = {kEthertypeQinQ, kEthertypeVlan};
  s.vlan_ids = {100, 200};
  s.ipv4_option_bytes = 8;
  s.hop_limit = 1;
  Bytes original = build_frame(s).bytes;
  Built b = build(original, {.type = kIcmpTimeExceeded});
  EXPECT_EQ(test::slice(b.frame, 0, 22), test::slice(original, 0, 22));
  EXPECT_EQ(b.p.l3_offset, 22u);
  EXPECT_EQ(b.p.vlan_count, 2);
  expect_error_about(b, original, kIcmpTimeExceeded);
}

// Errors about fragments (a reassembly timeout is the kernel's; a time exceeded in transit or a
// fragment too big is ferry's): the first quotes the ports, a later one quotes none.
TEST(BuildIcmpError, AboutFragments) {
  for (const Bytes* fragment : {&test::kUdp4Fragment0, &test::kUdp4Fragment1, &test::kUdp6Fragment0,
                                &test::kUdp6Fragment2}) {
    ParsedPacket p;
    Fragment frag;
    ASSERT_EQ(parse_fragment(*fragment, p, frag), FragmentParse::fragment);
    Bytes f = *fragment;
    f.resize(kUmemFrameBytes);
    std::uint8_t type = p.is_v4() ? kIcmpTimeExceeded : kIcmp6TimeExceeded;
    std::uint32_t length =
        build_icmp_error(f, p, {.type = type}, p.is_v4() ? kGateway4 : kGateway6, 7);
    ASSERT_EQ(length, fragment->size() + (p.is_v4() ? 28u : 48u));
    f.resize(length);
    ParsedPacket outer;
    IcmpError e;
    ASSERT_EQ(parse_frame(f, outer), ParseError::unsupported_protocol);
    EXPECT_EQ(parse_icmp_error(f, outer, e), frag.first() ? IcmpParse::error : IcmpParse::not_udp);
    EXPECT_EQ(test::slice(f, outer.l4_offset + 8, fragment->size() - 14),
              test::slice(*fragment, 14, fragment->size() - 14));
  }
}

// Whatever parse filled p, the error is built inside the frame: here about an ICMP error and an
// IPv6 packet with an extension header (which the caller would not answer, RFC 1122 3.2.2).
TEST(BuildIcmpError, SafeForAnyPacketAParseFilled) {
  for (const Bytes* original :
       {&test::kIcmp4PortUnreachableFromBackend, &test::kIcmp6PortUnreachableFromBackend}) {
    ParsedPacket p;
    ASSERT_EQ(parse_frame(*original, p), ParseError::unsupported_protocol);
    Bytes f = *original;
    f.resize(kUmemFrameBytes);
    std::uint32_t length = build_icmp_error(f, p, {.type = 11}, kGateway6, 1);
    EXPECT_EQ(length, original->size() + (p.is_v4() ? 28u : 48u));
  }
  Bytes hop_by_hop = test::kUdp6;
  hop_by_hop[14 + 6] = 0;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(hop_by_hop, p), ParseError::ipv6_extension_header);
  Bytes f = hop_by_hop;
  f.resize(kUmemFrameBytes);
  EXPECT_EQ(build_icmp_error(f, p, {.type = 3}, kGateway6, 1), hop_by_hop.size() + 48u);
}

}  // namespace
}  // namespace ferry::packet
