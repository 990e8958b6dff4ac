// parse_fragment() over scapy's IPv4/IPv6 fragments and hand-built bad ones; fragment_ipv4()
// against scapy's own cut and against the RFC 791 rules, piece by piece.
#include "lib/packet/fragment.hh"

#include <gtest/gtest.h>

#include "lib/packet/checksum.hh"
#include "lib/packet/rewrite.hh"
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

struct Parsed {
  FragmentParse result;
  ParsedPacket p;
  Fragment f;
};

Parsed parse(const Bytes& frame) {
  Parsed r;
  r.result = parse_fragment(frame, r.p, r.f);
  return r;
}

FrameSpec v6_spec() {
  FrameSpec s;
  s.version = IpVersion::v6;
  s.src = addr("2001:db8::1");
  s.dst = addr("2001:db8:ffff::10");
  return s;
}

TEST(ParseFragment, Ipv4FirstMiddleAndLastOfScapysCut) {
  Parsed first = parse(test::kUdp4Fragment0);
  ASSERT_EQ(first.result, FragmentParse::fragment);
  EXPECT_EQ(first.f.id, 0x1234u);
  EXPECT_EQ(first.f.offset_bytes, 0u);
  EXPECT_EQ(first.f.data_bytes, 48u);
  EXPECT_TRUE(first.f.more);
  EXPECT_TRUE(first.f.first());
  EXPECT_EQ(first.p.protocol, IPPROTO_UDP);
  EXPECT_EQ(first.p.l4_offset, 34u);
  EXPECT_EQ(first.p.l4_bytes, 48u);
  EXPECT_EQ(first.p.src_port, 40000);
  EXPECT_EQ(first.p.dst_port, 53);
  EXPECT_EQ(first.p.payload_offset, 42u);
  EXPECT_EQ(first.p.payload_bytes, 40u);
  EXPECT_FALSE(first.p.fragment_tail);
  EXPECT_EQ(first.p.src_address, addr("192.0.2.1"));
  EXPECT_EQ(first.p.dst_address, addr("10.0.0.10"));
  EXPECT_EQ(first.p.hop_limit, 64);

  Parsed middle = parse(test::kUdp4Fragment1);
  ASSERT_EQ(middle.result, FragmentParse::fragment);
  EXPECT_EQ(middle.f.offset_bytes, 48u);
  EXPECT_EQ(middle.f.data_bytes, 48u);
  EXPECT_TRUE(middle.f.more);
  EXPECT_TRUE(middle.p.fragment_tail);
  EXPECT_EQ(middle.p.src_port, 0);
  EXPECT_EQ(middle.p.dst_port, 0);
  EXPECT_EQ(middle.p.payload_offset, middle.p.l4_offset);
  EXPECT_EQ(middle.p.payload_bytes, 48u);

  Parsed last = parse(test::kUdp4Fragment2);
  ASSERT_EQ(last.result, FragmentParse::fragment);
  EXPECT_EQ(last.f.offset_bytes, 96u);
  EXPECT_EQ(last.f.data_bytes, 32u);
  EXPECT_FALSE(last.f.more);
  EXPECT_EQ(last.f.end_bytes(), 128u);  // the UDP length of the datagram
  EXPECT_TRUE(last.p.fragment_tail);
  EXPECT_TRUE(frame_matches(test::kUdp4Fragment0, first.p));
  EXPECT_TRUE(frame_matches(test::kUdp4Fragment1, middle.p));
  EXPECT_TRUE(frame_matches(test::kUdp4Fragment2, last.p));
}

TEST(ParseFragment, Ipv6FirstMiddleAndLastOfScapysCut) {
  Parsed first = parse(test::kUdp6Fragment0);
  ASSERT_EQ(first.result, FragmentParse::fragment);
  EXPECT_EQ(first.f.id, 0xabcdefu);
  EXPECT_EQ(first.f.offset_bytes, 0u);
  EXPECT_EQ(first.f.data_bytes, 48u);
  EXPECT_TRUE(first.f.more);
  EXPECT_EQ(first.p.version, IpVersion::v6);
  EXPECT_EQ(first.p.l3_bytes, 40u + 56u);
  EXPECT_EQ(first.p.l4_offset, 14u + 48u);
  EXPECT_EQ(first.p.src_port, 40000);
  EXPECT_EQ(first.p.dst_port, 53);
  EXPECT_EQ(first.p.payload_bytes, 40u);
  EXPECT_EQ(first.p.dst_address, addr("2001:db8:ffff::10"));
  EXPECT_TRUE(frame_matches(test::kUdp6Fragment0, first.p));

  Parsed middle = parse(test::kUdp6Fragment1);
  ASSERT_EQ(middle.result, FragmentParse::fragment);
  EXPECT_EQ(middle.f.offset_bytes, 48u);
  EXPECT_TRUE(middle.f.more);
  EXPECT_TRUE(middle.p.fragment_tail);
  EXPECT_EQ(middle.p.payload_offset, 62u);

  Parsed last = parse(test::kUdp6Fragment2);
  ASSERT_EQ(last.result, FragmentParse::fragment);
  EXPECT_EQ(last.f.offset_bytes, 96u);
  EXPECT_EQ(last.f.data_bytes, 32u);
  EXPECT_FALSE(last.f.more);
  EXPECT_EQ(last.f.end_bytes(), 128u);
  EXPECT_TRUE(frame_matches(test::kUdp6Fragment2, last.p));
}

TEST(ParseFragment, Ipv6AtomicFragmentIsFirstAndLast) {
  auto whole = build_frame(v6_spec());
  Bytes f = test::ipv6_fragment(whole, 0, whole.bytes.size() - whole.l4_offset, false, 7);
  Parsed r = parse(f);
  ASSERT_EQ(r.result, FragmentParse::fragment);
  EXPECT_TRUE(r.f.first());
  EXPECT_FALSE(r.f.more);
  EXPECT_EQ(r.f.data_bytes, 12u);  // UDP header + "ping"
  EXPECT_EQ(r.p.payload_bytes, 4u);
  EXPECT_EQ(r.p.dst_port, 53);
}

TEST(ParseFragment, WholePacketsAreNotFragments) {
  for (const Bytes* f : {&test::kUdp4, &test::kUdp6, &test::kTcp4, &test::kQinQUdp4}) {
    EXPECT_EQ(parse(*f).result, FragmentParse::not_a_fragment);
  }
  EXPECT_EQ(parse(test::kIcmp4PortUnreachableFromBackend).result, FragmentParse::not_a_fragment);
  Bytes arp(42, 0);
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(parse(arp).result, FragmentParse::not_a_fragment);
  // IPv6 with a hop-by-hop header and UDP behind it: an extension header, not a fragment.
  auto whole = build_frame(v6_spec());
  Bytes f = whole.bytes;
  std::size_t l3 = whole.l3_offset;
  f.insert(f.begin() + static_cast<std::ptrdiff_t>(whole.l4_offset), {17, 0, 1, 4, 0, 0, 0, 0});
  f[l3 + 6] = 0;
  test::put16(f, l3 + 4, static_cast<std::uint16_t>(f.size() - l3 - 40));
  EXPECT_EQ(parse(f).result, FragmentParse::not_a_fragment);
}

TEST(ParseFragment, FragmentsOfOtherProtocolsAreTheKernels) {
  FrameSpec tcp;
  tcp.protocol = IPPROTO_TCP;
  auto tcp4 = build_frame(tcp);
  EXPECT_EQ(parse(test::ipv4_fragment(tcp4, 0, 24, true)).result, FragmentParse::not_udp);
  Bytes tcp6 = test::kUdp6Fragment1;
  tcp6[14 + 40] = IPPROTO_TCP;  // the Fragment header's next header
  EXPECT_EQ(parse(tcp6).result, FragmentParse::not_udp);
  // A Fragment header behind a hop-by-hop header: a fragment, but not one ferry takes.
  Bytes behind = test::kUdp6Fragment0;
  behind.insert(behind.begin() + 54, {44, 0, 1, 4, 0, 0, 0, 0});
  behind[14 + 6] = 0;
  test::put16(behind, 14 + 4, 56 + 8);
  EXPECT_EQ(parse(behind).result, FragmentParse::not_udp);
}

TEST(ParseFragment, FirstFragmentWithoutTheWholeUdpHeaderIsTiny) {
  FrameSpec s;
  s.payload.assign(40, 0xab);
  auto whole = build_frame(s);
  // 4 data bytes: the ports, no length or checksum. (Not a multiple of 8 either: tiny wins.)
  EXPECT_EQ(parse(test::ipv4_fragment(whole, 0, 4, true)).result, FragmentParse::tiny_first);
  EXPECT_EQ(parse(test::ipv4_fragment(whole, 0, 0, true)).result, FragmentParse::tiny_first);
  auto whole6 = build_frame(v6_spec());
  EXPECT_EQ(parse(test::ipv6_fragment(whole6, 0, 0, true, 1)).result, FragmentParse::tiny_first);
  EXPECT_EQ(parse(test::ipv6_fragment(whole6, 0, 8, true, 1)).result, FragmentParse::fragment);
}

TEST(ParseFragment, LengthsThatDoNotAddUpAreMalformed) {
  FrameSpec s;
  s.payload.assign(64, 0xab);
  auto whole = build_frame(s);
  // A fragment with more to come must carry a multiple of 8 bytes.
  EXPECT_EQ(parse(test::ipv4_fragment(whole, 8, 20, true)).result, FragmentParse::malformed);
  EXPECT_EQ(parse(test::ipv4_fragment(whole, 8, 20, false)).result, FragmentParse::fragment);
  // An empty later fragment.
  EXPECT_EQ(parse(test::ipv4_fragment(whole, 8, 0, false)).result, FragmentParse::malformed);
  // Past 65535 bytes: offset 8189 x 8 = 65512, plus 32 bytes of data.
  Bytes far = test::ipv4_fragment(whole, 8, 32, false);
  test::put16(far, 14 + 6, 8189);
  test::fix_ipv4_checksum(far, 14);
  EXPECT_EQ(parse(far).result, FragmentParse::malformed);
  test::put16(far, 14 + 6, 8188);  // 65504 + 32 = 65536: still one too many
  EXPECT_EQ(parse(far).result, FragmentParse::malformed);
  Bytes edge = test::ipv4_fragment(whole, 8, 24, false);
  test::put16(edge, 14 + 6, 8189);  // 65512 + 23 would fit; 24 ends at 65536
  EXPECT_EQ(parse(edge).result, FragmentParse::malformed);
  edge.pop_back();
  test::put16(edge, 14 + 2, static_cast<std::uint16_t>(20 + 23));
  EXPECT_EQ(parse(edge).result, FragmentParse::fragment);
  // A first fragment whose UDP length is below the UDP header.
  Bytes short_udp = test::ipv4_fragment(whole, 0, 16, true);
  test::put16(short_udp, 34 + 4, 7);
  EXPECT_EQ(parse(short_udp).result, FragmentParse::malformed);
  // The IPv4 total length past the frame: parse_frame()'s check, fragment or not.
  Bytes cut = test::ipv4_fragment(whole, 8, 16, true);
  cut.pop_back();
  EXPECT_EQ(parse(cut).result, FragmentParse::malformed);
  // IPv6: a Fragment header that does not fit the payload length, a non-multiple of 8.
  Bytes v6 = test::kUdp6Fragment1;
  test::put16(v6, 14 + 4, 4);
  EXPECT_EQ(parse(v6).result, FragmentParse::malformed);
  v6 = test::kUdp6Fragment1;
  test::put16(v6, 14 + 4, 8 + 44);
  EXPECT_EQ(parse(v6).result, FragmentParse::malformed);
  v6 = test::kUdp6Fragment1;
  v6[14 + 40 + 3] &= 0xfe;  // M clear: a last fragment may end anywhere
  test::put16(v6, 14 + 4, 8 + 44);
  EXPECT_EQ(parse(v6).result, FragmentParse::fragment);
}

TEST(ParseFragment, TruncationAtEveryByteNeverReadsOutside) {
  for (const Bytes* whole : {&test::kUdp4Fragment0, &test::kUdp4Fragment2, &test::kUdp6Fragment0,
                             &test::kUdp6Fragment2}) {
    for (std::size_t n = 0; n < whole->size(); ++n) {
      Bytes cut(whole->begin(), whole->begin() + static_cast<std::ptrdiff_t>(n));
      EXPECT_NE(parse(cut).result, FragmentParse::fragment) << n;
    }
  }
}

// The DNAT of a fragmented datagram: the first fragment's rewrite_endpoint() and the others'
// rewrite_address(); reassembled, the datagram's UDP checksum is what a sender would compute.
TEST(ParseFragment, RewritesKeepTheDatagramChecksumExact) {
  std::vector<Bytes> pieces = {test::kUdp4Fragment0, test::kUdp4Fragment1, test::kUdp4Fragment2};
  Bytes datagram;
  for (auto& piece : pieces) {
    Parsed r = parse(piece);
    ASSERT_EQ(r.result, FragmentParse::fragment);
    ASSERT_TRUE(frame_matches(piece, r.p));
    if (r.f.first()) {
      rewrite_endpoint(piece, r.p, Side::destination, addr("10.0.1.2"), 5353);
    } else {
      rewrite_address(piece, r.p, Side::destination, addr("10.0.1.2"));
    }
    EXPECT_EQ(stored16(piece, 14 + 10), test::reference_ipv4_checksum(piece, 14, 20));
    datagram.insert(datagram.end(), piece.begin() + 34, piece.end());
  }
  // The reassembled datagram as a frame of its own.
  FrameSpec s;
  s.dst = addr("10.0.1.2");
  s.dst_port = 5353;
  s.payload.assign(datagram.begin() + 8, datagram.end());
  auto expected = build_frame(s);
  EXPECT_EQ(Bytes(expected.bytes.begin() + 34, expected.bytes.end()), datagram);
}

// --- fragment_ipv4 ---

struct Pieces {
  std::vector<Bytes> buffers;  // piece 0 is the frame itself
  std::vector<std::uint32_t> lengths;
};

// Cuts a copy of `frame` at `mtu` into as many pieces as ipv4_fragment_count() says, each buffer
// as large as the frame and then trimmed to its piece's length.
Pieces cut(const Bytes& frame, std::uint32_t mtu) {
  Pieces out;
  out.buffers.push_back(frame);
  ParsedPacket p;
  Fragment f;
  if (parse_frame(frame, p) != ParseError::none) {
    EXPECT_EQ(parse_fragment(frame, p, f), FragmentParse::fragment);
  }
  std::uint32_t count = ipv4_fragment_count(p, mtu);
  out.buffers.resize(std::max<std::uint32_t>(count, 1), Bytes(frame.size(), 0xee));
  std::vector<FrameBytes> more;
  for (std::size_t i = 1; i < out.buffers.size(); ++i) more.emplace_back(out.buffers[i]);
  out.lengths.assign(out.buffers.size(), 0);
  EXPECT_TRUE(fragment_ipv4(out.buffers[0], p, mtu, more, out.lengths));
  for (std::size_t i = 0; i < out.buffers.size(); ++i) out.buffers[i].resize(out.lengths[i]);
  return out;
}

TEST(FragmentIpv4, CutsAsScapyDoes) {
  ParsedPacket p;
  ASSERT_EQ(parse_frame(test::kUdp4Datagram128, p), ParseError::none);
  EXPECT_EQ(ipv4_fragment_count(p, 68), 3u);
  Pieces pieces = cut(test::kUdp4Datagram128, 68);
  ASSERT_EQ(pieces.buffers.size(), 3u);
  EXPECT_EQ(pieces.buffers[0], test::kUdp4Fragment0);
  EXPECT_EQ(pieces.buffers[1], test::kUdp4Fragment1);
  EXPECT_EQ(pieces.buffers[2], test::kUdp4Fragment2);
}

// A 3,000-byte IPv4 datagram (20 + 8 + 2972) at the MTUs of a tunnel and of RFC 791's minimum
// datagram size: every piece checked field by field.
TEST(FragmentIpv4, A3000ByteDatagramAtMtu1400And576) {
  FrameSpec s;
  s.payload.resize(2972);
  for (std::size_t i = 0; i < s.payload.size(); ++i)
    s.payload[i] = static_cast<std::uint8_t>(i * 7);
  auto whole = build_frame(s);
  ASSERT_EQ(whole.bytes.size(), 14u + 3000u);
  Bytes original_data(whole.bytes.begin() + 34, whole.bytes.end());
  struct Case {
    std::uint32_t mtu;
    std::vector<std::uint32_t> data_bytes;  // 8-byte multiples of (mtu - 20), the rest last
  };
  for (const Case& c : {Case{1400, {1376, 1376, 228}}, Case{576, {552, 552, 552, 552, 552, 220}}}) {
    ParsedPacket p;
    ASSERT_EQ(parse_frame(whole.bytes, p), ParseError::none);
    ASSERT_EQ(ipv4_fragment_count(p, c.mtu), c.data_bytes.size()) << c.mtu;
    Pieces pieces = cut(whole.bytes, c.mtu);
    ASSERT_EQ(pieces.buffers.size(), c.data_bytes.size());
    Bytes data;
    std::uint32_t offset = 0;
    for (std::size_t i = 0; i < pieces.buffers.size(); ++i) {
      const Bytes& f = pieces.buffers[i];
      bool last = i + 1 == pieces.buffers.size();
      SCOPED_TRACE(testing::Message() << "mtu " << c.mtu << " piece " << i);
      ASSERT_EQ(f.size(), 34u + c.data_bytes[i]);
      EXPECT_LE(f.size() - 14, c.mtu);
      EXPECT_EQ(Bytes(f.begin(), f.begin() + 14),
                Bytes(whole.bytes.begin(), whole.bytes.begin() + 14));
      EXPECT_EQ(f[14], 0x45);
      EXPECT_EQ(f[15], 0);
      EXPECT_EQ(stored16(f, 16), 20 + c.data_bytes[i]);
      EXPECT_EQ(stored16(f, 18), 0xbeef);  // the datagram's identification, in every piece
      EXPECT_EQ(stored16(f, 20), (last ? 0 : 0x2000) | offset / 8);
      EXPECT_EQ(f[22], 64);
      EXPECT_EQ(f[23], IPPROTO_UDP);
      EXPECT_EQ(Bytes(f.begin() + 26, f.begin() + 34),
                Bytes(whole.bytes.begin() + 26, whole.bytes.begin() + 34));
      EXPECT_EQ(stored16(f, 24), ipv4_header_checksum(f.data() + 14, 20));
      EXPECT_EQ(stored16(f, 24), test::reference_ipv4_checksum(f, 14, 20));
      Fragment frag;
      ParsedPacket q;
      ASSERT_EQ(parse_fragment(f, q, frag), FragmentParse::fragment);
      EXPECT_EQ(frag.offset_bytes, offset);
      EXPECT_EQ(frag.more, !last);
      data.insert(data.end(), f.begin() + 34, f.end());
      offset += c.data_bytes[i];
    }
    EXPECT_EQ(data, original_data);
  }
}

// RFC 791 3.1: an option's copy flag says whether it goes into every fragment. Router Alert
// (0x94) has it, Record Route (0x07) does not: after the first piece its bytes are NOPs, the
// header keeping its length (as Linux's ip_options_fragment()).
TEST(FragmentIpv4, OptionsAreCopiedPerTheirFlag) {
  FrameSpec s;
  s.ipv4_option_bytes = 12;
  s.payload.assign(200, 0x5a);
  auto whole = build_frame(s);
  const Bytes options = {0x94, 0x04, 0x00, 0x00,                    // Router Alert, copied
                         0x07, 0x07, 0x04, 0x00, 0x00, 0x00, 0x00,  // Record Route, not copied
                         0x00};                                     // End of options list
  std::copy(options.begin(), options.end(), whole.bytes.begin() + 34);
  test::fix_ipv4_checksum(whole.bytes, 14);
  const Bytes later_options = {0x94, 0x04, 0x00, 0x00, 0x01, 0x01,
                               0x01, 0x01, 0x01, 0x01, 0x01, 0x00};
  Pieces pieces = cut(whole.bytes, 100);  // (100 - 32) & ~7 = 64 data bytes a piece
  ASSERT_EQ(pieces.buffers.size(), 4u);   // 208 bytes of UDP: 64 + 64 + 64 + 16
  for (std::size_t i = 0; i < pieces.buffers.size(); ++i) {
    const Bytes& f = pieces.buffers[i];
    EXPECT_EQ(f[14], 0x48) << i;
    EXPECT_EQ(Bytes(f.begin() + 34, f.begin() + 46), i == 0 ? options : later_options) << i;
    EXPECT_EQ(stored16(f, 24), test::reference_ipv4_checksum(f, 14, 32)) << i;
    EXPECT_EQ(stored16(f, 20) & 0x1fff, i * 64 / 8) << i;
  }
  // An option list that stops making sense (a length running past the header) is NOPs from there.
  Bytes broken = whole.bytes;
  broken[34 + 5] = 40;
  test::fix_ipv4_checksum(broken, 14);
  Pieces again = cut(broken, 100);
  EXPECT_EQ(Bytes(again.buffers[1].begin() + 34, again.buffers[1].begin() + 46),
            (Bytes{0x94, 0x04, 0x00, 0x00, 1, 1, 1, 1, 1, 1, 1, 1}));
}

// A fragment is cut again within its place in the datagram: a middle fragment's pieces all say
// MF; the last fragment's last piece does not.
TEST(FragmentIpv4, CutsAFragmentAgainWithinTheDatagram) {
  FrameSpec s;
  s.payload.resize(2972);
  for (std::size_t i = 0; i < s.payload.size(); ++i) s.payload[i] = static_cast<std::uint8_t>(i);
  auto whole = build_frame(s);
  for (bool more : {true, false}) {
    std::uint32_t data = more ? 1376 : 2980 - 1376;
    Bytes fragment = test::ipv4_fragment(whole, 1376, data, more);
    Pieces pieces = cut(fragment, 576);
    ASSERT_EQ(pieces.buffers.size(), (data + 551) / 552);
    Bytes joined;
    for (std::size_t i = 0; i < pieces.buffers.size(); ++i) {
      const Bytes& f = pieces.buffers[i];
      bool last = i + 1 == pieces.buffers.size();
      EXPECT_EQ(stored16(f, 20), ((last && !more) ? 0 : 0x2000) | (1376 + i * 552) / 8);
      EXPECT_EQ(stored16(f, 24), test::reference_ipv4_checksum(f, 14, 20));
      joined.insert(joined.end(), f.begin() + 34, f.end());
    }
    EXPECT_EQ(joined, Bytes(fragment.begin() + 34, fragment.end()));
  }
}

TEST(FragmentIpv4, RefusesWhatItCannotCutAndTouchesNothing) {
  FrameSpec s;
  s.payload.resize(1000);
  auto whole = build_frame(s);
  ParsedPacket p;
  ASSERT_EQ(parse_frame(whole.bytes, p), ParseError::none);
  Bytes frame = whole.bytes;
  std::vector<Bytes> buffers(4, Bytes(frame.size(), 0xee));
  std::vector<FrameBytes> more(buffers.begin(), buffers.end());
  std::vector<std::uint32_t> lengths(5, 0);
  EXPECT_EQ(ipv4_fragment_count(p, 67), 0u);
  EXPECT_FALSE(fragment_ipv4(frame, p, 67, more, lengths));
  EXPECT_EQ(ipv4_fragment_count(p, 576), 2u);
  // One buffer too few, or one too small for its piece.
  EXPECT_FALSE(fragment_ipv4(frame, p, 300, {more.data(), 2}, lengths));
  EXPECT_FALSE(fragment_ipv4(frame, p, 576, more, {lengths.data(), 1}));
  Bytes small(100);
  std::vector<FrameBytes> too_small = {small};
  EXPECT_FALSE(fragment_ipv4(frame, p, 576, too_small, lengths));
  // DF: fragmentation needed is the caller's to send.
  Bytes df = frame;
  test::put16(df, 20, 0x4000);
  test::fix_ipv4_checksum(df, 14);
  Bytes df_before = df;
  EXPECT_FALSE(fragment_ipv4(df, p, 576, more, lengths));
  EXPECT_EQ(df, df_before);
  EXPECT_EQ(frame, whole.bytes);
  for (const Bytes& b : buffers) EXPECT_EQ(b, Bytes(frame.size(), 0xee));
  EXPECT_EQ(lengths, std::vector<std::uint32_t>(5, 0));
  // IPv6 is never fragmented on the way (RFC 8200 5).
  ParsedPacket p6;
  ASSERT_EQ(parse_frame(test::kUdp6, p6), ParseError::none);
  EXPECT_EQ(ipv4_fragment_count(p6, 68), 0u);
}

TEST(FragmentIpv4, APacketThatFitsIsOnePieceLeftAsItIs) {
  FrameSpec s;
  s.pad_to_bytes = 60;  // Ethernet padding is not part of the piece
  auto whole = build_frame(s);
  ParsedPacket p;
  ASSERT_EQ(parse_frame(whole.bytes, p), ParseError::none);
  EXPECT_EQ(ipv4_fragment_count(p, 68), 1u);
  Bytes frame = whole.bytes;
  std::uint32_t length = 0;
  EXPECT_TRUE(fragment_ipv4(frame, p, 68, {}, {&length, 1}));
  EXPECT_EQ(length, 14u + 32u);
  EXPECT_EQ(frame, whole.bytes);
}

// The largest header at the smallest MTU leaves 8 data bytes a piece.
TEST(FragmentIpv4, SixtyByteHeaderAtMtu68CarriesEightBytesAPiece) {
  FrameSpec s;
  s.ipv4_option_bytes = 40;
  s.payload.resize(20);
  auto whole = build_frame(s);
  ParsedPacket p;
  ASSERT_EQ(parse_frame(whole.bytes, p), ParseError::none);
  EXPECT_EQ(ipv4_fragment_count(p, 68), 4u);  // 28 bytes of UDP: 8 + 8 + 8 + 4
  Pieces pieces = cut(whole.bytes, 68);
  ASSERT_EQ(pieces.buffers.size(), 4u);
  EXPECT_EQ(pieces.lengths, (std::vector<std::uint32_t>{14 + 68, 14 + 68, 14 + 68, 14 + 64}));
}

}  // namespace
}  // namespace ferry::packet
