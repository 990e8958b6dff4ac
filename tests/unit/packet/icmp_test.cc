// parse_icmp_error() over real and hand-built errors, and translate_icmp_error() against scapy's
// rendering of the translated error and a from-scratch recomputation of every checksum in it.
#include "lib/packet/icmp.hh"

#include <gtest/gtest.h>

#include <random>

#include "lib/packet/checksum.hh"
#include "lib/packet/rewrite.hh"
#include "tests/unit/packet/ip_hop_builder.hh"
#include "tests/unit/packet/ip_hop_vectors.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::build_frame;
using test::build_icmp_frame;
using test::Bytes;
using test::FrameSpec;
using test::IcmpSpec;
using test::stored16;

struct Parsed {
  ParseError outer_result = ParseError::none;
  IcmpParse result = IcmpParse::malformed;
  ParsedPacket outer;
  IcmpError e;
};

Parsed parse(const Bytes& frame) {
  Parsed r;
  r.outer_result = parse_frame(frame, r.outer);
  r.result = parse_icmp_error(frame, r.outer, r.e);
  return r;
}

IcmpSpec v6_spec() {
  IcmpSpec s;
  s.version = IpVersion::v6;
  s.src = addr("2001:db8:1::2");
  s.dst = addr("2001:db8::1");
  s.type = kIcmp6DestinationUnreachable;
  s.code = 4;
  return s;
}

FrameSpec udp6_spec() {
  FrameSpec s;
  s.version = IpVersion::v6;
  s.src = addr("2001:db8::1");
  s.dst = addr("2001:db8:1::2");
  s.dst_port = 5353;
  return s;
}

// --- parse_icmp_error ---

TEST(ParseIcmpError, Ipv4PortUnreachableVector) {
  Parsed r = parse(test::kIcmp4PortUnreachableFromBackend);
  EXPECT_EQ(r.outer_result, ParseError::unsupported_protocol);
  ASSERT_EQ(r.result, IcmpParse::error);
  EXPECT_EQ(r.e.type, kIcmpDestinationUnreachable);
  EXPECT_EQ(r.e.code, 3);
  EXPECT_EQ(r.e.icmp_offset, 34u);
  EXPECT_EQ(r.e.icmp_bytes, 47u);
  EXPECT_EQ(r.e.quoted_l3_offset, 42u);
  EXPECT_EQ(r.e.quoted_l3_header_bytes, 20u);
  EXPECT_EQ(r.e.quoted_l4_offset, 62u);
  EXPECT_EQ(r.e.quoted_l4_bytes, 19u);  // the whole datagram is quoted
  EXPECT_EQ(r.e.quoted_src, addr("192.0.2.1"));
  EXPECT_EQ(r.e.quoted_dst, addr("10.0.1.2"));
  EXPECT_EQ(r.e.quoted_src_port, 40000);
  EXPECT_EQ(r.e.quoted_dst_port, 5353);
  EXPECT_EQ(r.outer.src_address, addr("10.0.1.2"));
  EXPECT_EQ(r.outer.dst_address, addr("192.0.2.1"));
}

TEST(ParseIcmpError, Ipv6PortUnreachableVector) {
  Parsed r = parse(test::kIcmp6PortUnreachableFromBackend);
  EXPECT_EQ(r.outer_result, ParseError::unsupported_protocol);
  ASSERT_EQ(r.result, IcmpParse::error);
  EXPECT_EQ(r.e.type, kIcmp6DestinationUnreachable);
  EXPECT_EQ(r.e.code, 4);
  EXPECT_EQ(r.e.icmp_offset, 54u);
  EXPECT_EQ(r.e.icmp_bytes, 68u);
  EXPECT_EQ(r.e.quoted_l3_offset, 62u);
  EXPECT_EQ(r.e.quoted_l3_header_bytes, 40u);
  EXPECT_EQ(r.e.quoted_l4_offset, 102u);
  EXPECT_EQ(r.e.quoted_l4_bytes, 20u);
  EXPECT_EQ(r.e.quoted_src, addr("2001:db8::1"));
  EXPECT_EQ(r.e.quoted_dst, addr("2001:db8:1::2"));
  EXPECT_EQ(r.e.quoted_src_port, 40000);
  EXPECT_EQ(r.e.quoted_dst_port, 5353);
}

TEST(ParseIcmpError, TheBuilderMakesTheScapyVectors) {
  // The byte-by-byte builder the other tests use, checked against scapy once.
  IcmpSpec s;
  s.quote = test::ip_packet({test::kUdp4ToBackend, 14, 34});  // TTL 63, as routed
  EXPECT_EQ(build_icmp_frame(s).bytes, test::kIcmp4PortUnreachableFromBackend);
  IcmpSpec s6 = v6_spec();
  s6.quote = test::ip_packet({test::kUdp6ToBackend, 14, 54});
  EXPECT_EQ(build_icmp_frame(s6).bytes, test::kIcmp6PortUnreachableFromBackend);
}

TEST(ParseIcmpError, EveryErrorTypeQuotingUdp) {
  auto datagram = build_frame(FrameSpec{});
  for (std::uint8_t type : {3, 11, 12}) {
    IcmpSpec s;
    s.type = type;
    s.code = 1;
    s.quote = test::ip_packet(datagram);
    Parsed r = parse(build_icmp_frame(s).bytes);
    EXPECT_EQ(r.result, IcmpParse::error) << int{type};
    EXPECT_EQ(r.e.type, type);
    EXPECT_EQ(r.e.quoted_dst_port, 53);
  }
  auto datagram6 = build_frame(udp6_spec());
  for (std::uint8_t type : {1, 2, 3, 4}) {
    IcmpSpec s = v6_spec();
    s.type = type;
    s.quote = test::ip_packet(datagram6);
    Parsed r = parse(build_icmp_frame(s).bytes);
    EXPECT_EQ(r.result, IcmpParse::error) << int{type};
    EXPECT_EQ(r.e.quoted_dst_port, 5353);
  }
}

TEST(ParseIcmpError, InformationalMessagesAreTheKernels) {
  auto datagram = build_frame(FrameSpec{});
  for (std::uint8_t type : {0, 4, 5, 8, 13, 14}) {  // echo reply, quench, redirect, echo, ts
    IcmpSpec s;
    s.type = type;
    s.quote = test::ip_packet(datagram);
    EXPECT_EQ(parse(build_icmp_frame(s).bytes).result, IcmpParse::not_an_error) << int{type};
  }
  for (std::uint8_t type : {0, 5, 127, 128, 129, 133, 134, 135, 136, 137}) {
    IcmpSpec s = v6_spec();
    s.type = type;
    s.quote = test::ip_packet(build_frame(udp6_spec()));
    EXPECT_EQ(parse(build_icmp_frame(s).bytes).result, IcmpParse::not_an_error) << int{type};
  }
  // Not ICMP at all, or the other version's ICMP.
  EXPECT_EQ(parse(test::kUdp4).result, IcmpParse::not_an_error);
  Bytes icmp_in_v6 = test::kUdp6;
  icmp_in_v6[14 + 6] = 1;
  EXPECT_EQ(parse(icmp_in_v6).result, IcmpParse::not_an_error);
  // An IPv4 fragment of an error is the kernel's to reassemble.
  IcmpSpec s;
  s.quote = test::ip_packet(datagram);
  auto fragment = build_icmp_frame(s);
  test::put16(fragment.bytes, 14 + 6, 0x2000);
  EXPECT_EQ(parse(fragment.bytes).result, IcmpParse::not_an_error);
}

TEST(ParseIcmpError, ErrorsAboutOtherThanUdpOrALaterFragment) {
  FrameSpec tcp;
  tcp.protocol = IPPROTO_TCP;
  IcmpSpec s;
  s.quote = test::ip_packet(build_frame(tcp));
  EXPECT_EQ(parse(build_icmp_frame(s).bytes).result, IcmpParse::not_udp);
  // An error about an error (RFC 1122 3.2.2 forbids sending one; receiving one is not ours).
  s.quote = test::ip_packet({test::kIcmp4PortUnreachableFromBackend, 14, 34});
  EXPECT_EQ(parse(build_icmp_frame(s).bytes).result, IcmpParse::not_udp);
  // A quoted later fragment has no UDP header; a quoted first fragment has it.
  FrameSpec big;
  big.payload.assign(64, 1);
  auto datagram = build_frame(big);
  s.quote = test::ip_packet({test::ipv4_fragment(datagram, 16, 32, true), 14, 34});
  EXPECT_EQ(parse(build_icmp_frame(s).bytes).result, IcmpParse::not_udp);
  s.quote = test::ip_packet({test::ipv4_fragment(datagram, 0, 32, true), 14, 34});
  Parsed first = parse(build_icmp_frame(s).bytes);
  EXPECT_EQ(first.result, IcmpParse::error);
  EXPECT_EQ(first.e.quoted_dst_port, 53);

  IcmpSpec s6 = v6_spec();
  FrameSpec big6 = udp6_spec();
  big6.payload.assign(64, 1);
  auto datagram6 = build_frame(big6);
  s6.quote = test::ip_packet({test::ipv6_fragment(datagram6, 16, 32, true, 9), 14, 62});
  EXPECT_EQ(parse(build_icmp_frame(s6).bytes).result, IcmpParse::not_udp);
  s6.quote = test::ip_packet({test::ipv6_fragment(datagram6, 0, 32, true, 9), 14, 62});
  Parsed first6 = parse(build_icmp_frame(s6).bytes);
  ASSERT_EQ(first6.result, IcmpParse::error);
  EXPECT_EQ(first6.e.quoted_l3_header_bytes, 48u);
  EXPECT_EQ(first6.e.quoted_l4_offset, first6.e.quoted_l3_offset + 48);
  EXPECT_EQ(first6.e.quoted_dst_port, 5353);
  // IPv6 quoting TCP, or an extension header other than Fragment.
  Bytes tcp6 = test::ip_packet(build_frame(udp6_spec()));
  tcp6[6] = IPPROTO_TCP;
  s6.quote = tcp6;
  EXPECT_EQ(parse(build_icmp_frame(s6).bytes).result, IcmpParse::not_udp);
  tcp6[6] = 0;  // hop-by-hop
  s6.quote = tcp6;
  EXPECT_EQ(parse(build_icmp_frame(s6).bytes).result, IcmpParse::not_udp);
}

// RFC 792: the quote holds the IP header and 64 bits of data, i.e. the UDP header. Anything shorter
// is malformed, however much of it there is.
TEST(ParseIcmpError, QuotesShorterThanTheIpHeaderAndEightBytesAreMalformed) {
  FrameSpec big;
  big.payload.assign(100, 1);
  big.ipv4_option_bytes = 8;
  Bytes datagram = test::ip_packet(build_frame(big));
  for (std::size_t n = 0; n <= 40; ++n) {
    IcmpSpec s;
    s.quote = test::slice(datagram, 0, n);
    Parsed r = parse(build_icmp_frame(s).bytes);
    EXPECT_EQ(r.result, n < 28 + 8 ? IcmpParse::malformed : IcmpParse::error) << n;
    if (r.result == IcmpParse::error) {
      EXPECT_EQ(r.e.quoted_l3_header_bytes, 28u);
      EXPECT_EQ(r.e.quoted_l4_bytes, n - 28);  // the quoted datagram is 136 bytes long
    }
  }
  Bytes datagram6 = test::ip_packet(build_frame(udp6_spec()));
  for (std::size_t n = 0; n <= datagram6.size(); ++n) {
    IcmpSpec s = v6_spec();
    s.quote = test::slice(datagram6, 0, n);
    EXPECT_EQ(parse(build_icmp_frame(s).bytes).result,
              n < 48 ? IcmpParse::malformed : IcmpParse::error)
        << n;
  }
  // An ICMP message shorter than its own 8-byte header.
  Bytes stub = build_icmp_frame(IcmpSpec{}).bytes;
  stub.resize(14 + 20 + 6);
  test::put16(stub, 14 + 2, 26);
  EXPECT_EQ(parse(stub).result, IcmpParse::malformed);
}

TEST(ParseIcmpError, QuotedHeadersThatDoNotAddUpAreMalformed) {
  Bytes datagram = test::ip_packet(build_frame(FrameSpec{}));
  auto with = [&](auto change) {
    IcmpSpec s;
    s.quote = datagram;
    change(s.quote);
    return parse(build_icmp_frame(s).bytes).result;
  };
  EXPECT_EQ(with([](Bytes& q) { q[0] = 0x44; }), IcmpParse::malformed);  // IHL 4
  EXPECT_EQ(with([](Bytes& q) { q[0] = 0x65; }), IcmpParse::malformed);  // IPv6 in ICMPv4
  EXPECT_EQ(with([](Bytes& q) { q[0] = 0x4f; }), IcmpParse::malformed);  // 60 bytes: not quoted
  // The quoted total length must hold the header and the UDP header.
  EXPECT_EQ(with([](Bytes& q) { test::put16(q, 2, 27); }), IcmpParse::malformed);
  EXPECT_EQ(with([](Bytes& q) { test::put16(q, 2, 28); }), IcmpParse::error);
  IcmpSpec s6 = v6_spec();
  s6.quote = test::ip_packet(build_frame(udp6_spec()));
  s6.quote[0] = 0x45;  // IPv4 in ICMPv6
  EXPECT_EQ(parse(build_icmp_frame(s6).bytes).result, IcmpParse::malformed);
  s6.quote = test::ip_packet(build_frame(udp6_spec()));
  test::put16(s6.quote, 4, 7);
  EXPECT_EQ(parse(build_icmp_frame(s6).bytes).result, IcmpParse::malformed);
}

// What routers usually send: a quote cut short of the datagram's total length; and what MPLS
// routers send (RFC 4884): the quote zero-padded to 128 bytes and extensions behind it.
TEST(ParseIcmpError, QuoteLengthIsBoundedByTheQuotedTotalLength) {
  FrameSpec big;
  big.payload.assign(1000, 1);
  Bytes datagram = test::ip_packet(build_frame(big));
  IcmpSpec s;
  s.quote = test::slice(datagram, 0, 548);
  Parsed r = parse(build_icmp_frame(s).bytes);
  ASSERT_EQ(r.result, IcmpParse::error);
  EXPECT_EQ(r.e.quoted_l4_bytes, 528u);

  Bytes small = test::ip_packet(build_frame(FrameSpec{}));  // 32 bytes
  s.type = kIcmpTimeExceeded;
  s.code = 0;
  s.word = 32;  // RFC 4884 length: 32 words of original datagram field
  s.quote = small;
  s.quote.resize(128, 0);
  s.quote.insert(s.quote.end(), {0x20, 0, 0x12, 0x34, 0, 8, 1, 1, 0, 0, 0x40, 0xff});  // MPLS
  r = parse(build_icmp_frame(s).bytes);
  ASSERT_EQ(r.result, IcmpParse::error);
  EXPECT_EQ(r.e.quoted_l4_bytes, 12u);
  EXPECT_EQ(r.e.icmp_bytes, 8u + 128u + 12u);
}

TEST(ParseIcmpError, VlanTaggedErrors) {
  IcmpSpec s;
  s.vlan_ids = {100, 200};
  s.quote = test::ip_packet(build_frame(FrameSpec{}));
  Parsed r = parse(build_icmp_frame(s).bytes);
  ASSERT_EQ(r.result, IcmpParse::error);
  EXPECT_EQ(r.e.icmp_offset, 22u + 20u);
  EXPECT_EQ(r.e.quoted_l4_offset, 22u + 20u + 8u + 20u);
}

// --- translate_icmp_error ---

// Every checksum of a translated error, recomputed from scratch with the naive sum and with
// lib/packet's full computations, against what the frame holds.
void expect_every_checksum_right(const Bytes& f) {
  Parsed r = parse(f);
  ASSERT_EQ(r.result, IcmpParse::error);
  const ParsedPacket& outer = r.outer;
  const IcmpError& e = r.e;
  bool v4 = outer.is_v4();
  if (v4) {
    std::uint32_t l3 = outer.l3_offset;
    EXPECT_EQ(stored16(f, l3 + 10), test::reference_ipv4_checksum(f, l3, 20));
    EXPECT_EQ(stored16(f, l3 + 10), ipv4_header_checksum(f.data() + l3, 20));
    std::uint32_t qh = e.quoted_l3_header_bytes;
    EXPECT_EQ(stored16(f, e.quoted_l3_offset + 10),
              test::reference_ipv4_checksum(f, e.quoted_l3_offset, qh));
    EXPECT_EQ(stored16(f, e.quoted_l3_offset + 10),
              ipv4_header_checksum(f.data() + e.quoted_l3_offset, qh));
  }
  EXPECT_EQ(test::reference_icmp_sum(f, outer.l3_offset, e.icmp_offset, e.icmp_bytes, v4), 0xffff);
  std::uint64_t sum = ones_complement_add(0, {f.data() + e.icmp_offset, e.icmp_bytes});
  if (!v4) {
    sum = ones_complement_add(sum, {f.data() + outer.src_address_offset(), 32});
    sum += e.icmp_bytes + IPPROTO_ICMPV6;
  }
  EXPECT_EQ(fold_checksum(sum), 0xffff);
  // The quoted datagram is whole: its UDP checksum, over the translated bytes.
  Bytes quoted = test::quoted_as_frame(f, outer.l3_offset, e.quoted_l3_offset);
  ParsedPacket q;
  ASSERT_EQ(parse_frame(quoted, q), ParseError::none);
  EXPECT_EQ(stored16(quoted, q.l4_checksum_offset()), l4_checksum(quoted, q));
  EXPECT_EQ(stored16(quoted, q.l4_checksum_offset()), test::reference_checksums(quoted, q).l4);
}

// The NAT's view: the backend's error about a balanced request goes back to the client with the
// VIP in place of the backend, in the quote and as the error's source.
Parsed translate_to_client(Bytes& f, const std::array<std::uint8_t, 16>& vip, std::uint16_t port) {
  Parsed r = parse(f);
  EXPECT_EQ(r.result, IcmpParse::error);
  translate_icmp_error(f, r.outer, r.e, Side::destination, vip, port, Side::source, vip);
  return r;
}

TEST(TranslateIcmpError, Ipv4PortUnreachableBecomesScapysTranslation) {
  Bytes f = test::kIcmp4PortUnreachableFromBackend;
  expect_every_checksum_right(f);
  Parsed r = translate_to_client(f, addr("10.0.0.10"), 53);
  EXPECT_EQ(f, test::kIcmp4PortUnreachableToClient);
  expect_every_checksum_right(f);
  // e and outer in step with the bytes.
  EXPECT_EQ(r.e.quoted_dst, addr("10.0.0.10"));
  EXPECT_EQ(r.e.quoted_dst_port, 53);
  EXPECT_EQ(r.e.quoted_src, addr("192.0.2.1"));
  EXPECT_EQ(r.outer.src_address, addr("10.0.0.10"));
  EXPECT_EQ(r.outer.src_port, 0);
  EXPECT_EQ(r.outer.payload_offset, r.e.icmp_offset + 8);
  EXPECT_TRUE(frame_matches(f, r.outer));
  Parsed again = parse(f);
  EXPECT_EQ(again.e.quoted_dst, r.e.quoted_dst);
  EXPECT_EQ(again.outer.src_address, r.outer.src_address);
  // And back: the identity.
  translate_icmp_error(f, r.outer, r.e, Side::destination, addr("10.0.1.2"), 5353, Side::source,
                       addr("10.0.1.2"));
  EXPECT_EQ(f, test::kIcmp4PortUnreachableFromBackend);
}

TEST(TranslateIcmpError, Ipv6PortUnreachableBecomesScapysTranslation) {
  Bytes f = test::kIcmp6PortUnreachableFromBackend;
  expect_every_checksum_right(f);
  Parsed r = translate_to_client(f, addr("2001:db8:ffff::10"), 53);
  EXPECT_EQ(f, test::kIcmp6PortUnreachableToClient);
  expect_every_checksum_right(f);
  EXPECT_EQ(stored16(f, r.e.icmp_offset + 2), 0x31cc);
  EXPECT_EQ(r.outer.src_address, addr("2001:db8:ffff::10"));
  EXPECT_EQ(r.e.quoted_dst_port, 53);
}

// The other direction of a NAT: an error about a reply the gateway sent from the VIP, coming back
// from the client's side, is translated to the backend (the quote's source, the outer
// destination).
TEST(TranslateIcmpError, QuotedSourceAndOuterDestination) {
  FrameSpec reply;
  reply.src = addr("10.0.0.10");
  reply.src_port = 53;
  reply.dst = addr("192.0.2.1");
  reply.dst_port = 40000;
  reply.ipv4_option_bytes = 4;
  IcmpSpec s;
  s.src = addr("192.0.2.1");
  s.dst = addr("10.0.0.10");
  s.quote = test::ip_packet(build_frame(reply));
  Bytes f = build_icmp_frame(s).bytes;
  Parsed r = parse(f);
  ASSERT_EQ(r.result, IcmpParse::error);
  translate_icmp_error(f, r.outer, r.e, Side::source, addr("10.0.1.2"), 5353, Side::destination,
                       addr("10.0.1.2"));
  expect_every_checksum_right(f);
  Parsed again = parse(f);
  EXPECT_EQ(again.e.quoted_src, addr("10.0.1.2"));
  EXPECT_EQ(again.e.quoted_src_port, 5353);
  EXPECT_EQ(again.outer.dst_address, addr("10.0.1.2"));
  EXPECT_EQ(again.outer.src_address, addr("192.0.2.1"));
}

// A router keeps a wrong checksum exactly as wrong: the sum over what it covers, the checksum
// included, is the same after the translation as before (0xffff when right); the checksum is off
// from the right one by the same ones'-complement amount.
TEST(TranslateIcmpError, WrongIcmpChecksumStaysExactlyAsWrong) {
  constexpr std::uint16_t kError = 0x1234;
  auto plus_error = [](std::uint16_t checksum) {
    return static_cast<std::uint16_t>(
        test::reference_sum({static_cast<std::uint8_t>(checksum >> 8),
                             static_cast<std::uint8_t>(checksum), kError >> 8, kError & 0xff}));
  };
  for (const Bytes* vector :
       {&test::kIcmp4PortUnreachableFromBackend, &test::kIcmp6PortUnreachableFromBackend}) {
    Bytes f = *vector;
    Parsed r = parse(f);
    bool v4 = r.outer.is_v4();
    std::size_t checksum_at = r.e.icmp_offset + 2;
    test::put16(f, checksum_at, plus_error(stored16(f, checksum_at)));
    std::uint16_t before = test::reference_icmp_sum(f, 14, r.e.icmp_offset, r.e.icmp_bytes, v4);
    ASSERT_NE(before, 0xffff);
    translate_to_client(f, v4 ? addr("10.0.0.10") : addr("2001:db8:ffff::10"), 53);
    EXPECT_EQ(test::reference_icmp_sum(f, 14, r.e.icmp_offset, r.e.icmp_bytes, v4), before);
    const Bytes& want =
        v4 ? test::kIcmp4PortUnreachableToClient : test::kIcmp6PortUnreachableToClient;
    EXPECT_EQ(stored16(f, checksum_at), plus_error(stored16(want, checksum_at)));
    test::put16(f, checksum_at, stored16(want, checksum_at));
    EXPECT_EQ(f, want);  // every other byte is scapy's translation
  }
}

// The quoted UDP checksum covers the sender's whole datagram, mostly not quoted. Translated, it is
// the checksum the whole datagram gets from the same NAT rewrite.
TEST(TranslateIcmpError, TruncatedQuoteGetsTheWholeDatagramsChecksum) {
  for (IpVersion v : {IpVersion::v4, IpVersion::v6}) {
    FrameSpec big = v == IpVersion::v4 ? FrameSpec{} : udp6_spec();
    big.dst = v == IpVersion::v4 ? addr("10.0.1.2") : addr("2001:db8:1::2");
    big.dst_port = 5353;
    big.payload.resize(1200);
    for (std::size_t i = 0; i < big.payload.size(); ++i) {
      big.payload[i] = static_cast<std::uint8_t>(i * 13);
    }
    auto datagram = build_frame(big);
    IcmpSpec s = v == IpVersion::v4 ? IcmpSpec{} : v6_spec();
    std::size_t quoted = v == IpVersion::v4 ? 548 : 1232;
    s.quote = test::slice(test::ip_packet(datagram), 0, quoted);
    Bytes f = build_icmp_frame(s).bytes;
    auto vip = v == IpVersion::v4 ? addr("10.0.0.10") : addr("2001:db8:ffff::10");
    Parsed r = translate_to_client(f, vip, 53);
    // The datagram through the same DNAT, in reverse.
    ParsedPacket p;
    ASSERT_EQ(parse_frame(datagram.bytes, p), ParseError::none);
    rewrite_endpoint(datagram.bytes, p, Side::destination, vip, 53);
    EXPECT_EQ(stored16(f, r.e.quoted_l4_offset + 6),
              stored16(datagram.bytes, p.l4_checksum_offset()));
    EXPECT_EQ(test::slice(f, r.e.quoted_l3_offset, quoted),
              test::slice(datagram.bytes, p.l3_offset, quoted));
    std::uint16_t sum =
        test::reference_icmp_sum(f, 14, r.e.icmp_offset, r.e.icmp_bytes, v == IpVersion::v4);
    EXPECT_EQ(sum, 0xffff);
  }
}

TEST(TranslateIcmpError, QuotedUdpChecksumZeroStaysZero) {
  FrameSpec none;
  none.dst = addr("10.0.1.2");
  none.dst_port = 5353;
  none.udp_no_checksum = true;
  IcmpSpec s;
  s.quote = test::ip_packet(build_frame(none));
  Bytes f = build_icmp_frame(s).bytes;
  Parsed r = translate_to_client(f, addr("10.0.0.10"), 53);
  EXPECT_EQ(stored16(f, r.e.quoted_l4_offset + 6), 0);
  EXPECT_EQ(test::reference_icmp_sum(f, 14, r.e.icmp_offset, r.e.icmp_bytes, true), 0xffff);
  EXPECT_EQ(stored16(f, r.e.quoted_l3_offset + 10),
            test::reference_ipv4_checksum(f, r.e.quoted_l3_offset, 20));
}

// Random quotes, addresses and ports: every checksum that was right stays right, and the ICMP sum
// (right or not) does not move.
TEST(TranslateIcmpError, IncrementalEqualsFullRecomputeOverRandomTranslations) {
  std::mt19937_64 rng(24);
  auto random_address = [&](bool v4) {
    std::array<std::uint8_t, 16> a{};
    for (std::size_t i = 0; i < (v4 ? 4u : 16u); ++i) a[i] = static_cast<std::uint8_t>(rng());
    return a;
  };
  for (int round = 0; round < 2000; ++round) {
    bool v4 = round % 2 == 0;
    FrameSpec d = v4 ? FrameSpec{} : udp6_spec();
    d.src = random_address(v4);
    d.dst = random_address(v4);
    d.src_port = static_cast<std::uint16_t>(rng());
    d.dst_port = static_cast<std::uint16_t>(rng());
    d.payload.resize(rng() % 40);
    for (auto& b : d.payload) b = static_cast<std::uint8_t>(rng());
    if (v4) d.ipv4_option_bytes = 4 * (rng() % 4);
    IcmpSpec s = v4 ? IcmpSpec{} : v6_spec();
    s.src = random_address(v4);
    s.dst = random_address(v4);
    s.word = static_cast<std::uint32_t>(rng());
    s.quote = test::ip_packet(build_frame(d));
    Bytes f = build_icmp_frame(s).bytes;
    bool corrupt = rng() % 4 == 0;
    Parsed r = parse(f);
    ASSERT_EQ(r.result, IcmpParse::error);
    if (corrupt) test::put16(f, r.e.icmp_offset + 2, static_cast<std::uint16_t>(rng()));
    std::uint16_t before = test::reference_icmp_sum(f, 14, r.e.icmp_offset, r.e.icmp_bytes, v4);
    Side quoted_side = rng() % 2 ? Side::source : Side::destination;
    Side outer_side = rng() % 2 ? Side::source : Side::destination;
    translate_icmp_error(f, r.outer, r.e, quoted_side, random_address(v4),
                         static_cast<std::uint16_t>(rng()), outer_side, random_address(v4));
    std::uint16_t after = test::reference_icmp_sum(f, 14, r.e.icmp_offset, r.e.icmp_bytes, v4);
    // Ones' complement has two zeros: a right checksum may read 0xffff or 0x0000 either way.
    if (before == 0xffff || before == 0) {
      EXPECT_TRUE(after == 0xffff || after == 0) << round;
    } else {
      EXPECT_EQ(after, before) << round;
    }
    if (!corrupt) expect_every_checksum_right(f);
  }
}

}  // namespace
}  // namespace ferry::packet
