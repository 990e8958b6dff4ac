// Checksums against independently computed vectors (RFC 1071's example, scapy frames, the naive
// reference in frame_builder.hh), and incremental updates against full recomputation.
#include "lib/packet/checksum.hh"

#include <gtest/gtest.h>

#include <random>

#include "lib/packet/rewrite.hh"
#include "tests/unit/packet/frame_builder.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::build_frame;
using test::FrameSpec;
using test::stored16;

TEST(Checksum, Rfc1071WorkedExample) {
  // RFC 1071 section 3: the words 0001 f203 f4f5 f6f7 sum (with end-around carry) to ddf2.
  std::vector<std::uint8_t> bytes = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(fold_checksum(ones_complement_add(0, bytes)), 0xddf2);
  // Split at an even boundary, summed in two calls: same result.
  std::uint64_t sum = ones_complement_add(0, {bytes.data(), 2});
  sum = ones_complement_add(sum, {bytes.data() + 2, 6});
  EXPECT_EQ(fold_checksum(sum), 0xddf2);
}

TEST(Checksum, OddLengthPadsTheLastByte) {
  // 0x0102 + 0x0300 (the odd byte 03 padded with a zero) = 0x0402.
  std::vector<std::uint8_t> bytes = {0x01, 0x02, 0x03};
  EXPECT_EQ(fold_checksum(ones_complement_add(0, bytes)), 0x0402);
  EXPECT_EQ(fold_checksum(ones_complement_add(0, bytes)), test::reference_sum(bytes));
}

TEST(Checksum, ManyCarriesFold) {
  std::vector<std::uint8_t> bytes(65536, 0xff);  // every word 0xffff: -0 in ones' complement
  EXPECT_EQ(fold_checksum(ones_complement_add(0, bytes)), 0xffff);
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<std::uint8_t> random(rng() % 3000);
    for (auto& b : random) b = static_cast<std::uint8_t>(rng());
    EXPECT_EQ(fold_checksum(ones_complement_add(0, random)), test::reference_sum(random));
  }
}

TEST(Checksum, FullChecksumsMatchScapyVectors) {
  struct Case {
    const char* name;
    const std::vector<std::uint8_t>* frame;
    std::uint16_t ipv4;  // what scapy wrote, 0 for IPv6
    std::uint16_t l4;
  };
  for (const Case& c :
       {Case{"udp4", &test::kUdp4, 0x9c87, 0x017d}, Case{"udp6", &test::kUdp6, 0, 0x71e2},
        Case{"tcp4", &test::kTcp4, 0xaec1, 0x82e0}, Case{"qinq", &test::kQinQUdp4, 0x9c91, 0x265b},
        Case{"ihl6", &test::kUdp4Ihl6, 0x19b6, 0xbbcd},
        Case{"udp4 balanced", &test::kUdp4ToBackend, 0x9c8f, 0xebd0},
        Case{"udp6 balanced", &test::kUdp6ToBackend, 0, 0x5d3b}}) {
    ParsedPacket p;
    ASSERT_EQ(parse_frame(*c.frame, p), ParseError::none) << c.name;
    if (p.is_v4()) {
      EXPECT_EQ(ipv4_header_checksum(c.frame->data() + p.l3_offset, p.l4_offset - p.l3_offset),
                c.ipv4)
          << c.name;
    }
    EXPECT_EQ(l4_checksum(*c.frame, p), c.l4) << c.name;
    EXPECT_EQ(stored16(*c.frame, p.l4_checksum_offset()), c.l4) << c.name;
  }
}

TEST(Checksum, UdpComputedZeroIsSentAsAllOnes) {
  for (IpVersion v : {IpVersion::v4, IpVersion::v6}) {
    // Make the last payload word equal to the checksum computed with that word zero: the sum then
    // becomes S + ~S = 0xffff, whose complement is 0, which UDP must send as 0xffff.
    FrameSpec s;
    s.version = v;
    if (v == IpVersion::v6) {
      s.src = addr("2001:db8::1");
      s.dst = addr("2001:db8::2");
    }
    s.payload = {1, 2, 0, 0};
    auto f = build_frame(s);
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f.bytes, p), ParseError::none);
    std::uint16_t c = l4_checksum(f.bytes, p);
    test::put16(f.bytes, p.payload_offset + 2, c);
    EXPECT_EQ(l4_checksum(f.bytes, p), 0xffff);
    EXPECT_EQ(test::reference_checksums(f.bytes, p).l4, 0xffff);
  }
}

TEST(ChecksumDelta, Rfc1624Example) {
  // RFC 1624 section 4: HC = 0xdd2f, a word m = 0x5555 changes to m' = 0x3285; eqn. 3 gives
  // HC' = 0x0000 (not 0xffff, the failure of eqn. 2 the RFC was written to fix).
  ChecksumDelta d;
  d.replace16(0x5555, 0x3285);
  EXPECT_EQ(d.apply(0xdd2f), 0x0000);
}

// Random rewrites of addresses, ports and TTL through rewrite_endpoint/decrement_hop_limit, each
// checked against a from-scratch recomputation of every checksum.
TEST(ChecksumDelta, IncrementalEqualsFullRecomputeOverRandomRewrites) {
  std::mt19937_64 rng(20240601);
  auto random_address = [&](IpVersion v) {
    std::array<std::uint8_t, 16> a{};
    for (std::size_t i = 0; i < (v == IpVersion::v4 ? 4u : 16u); ++i) {
      a[i] = static_cast<std::uint8_t>(rng());
    }
    return a;
  };
  int checked = 0;
  for (int round = 0; round < 4000; ++round) {
    FrameSpec s;
    s.version = round % 2 ? IpVersion::v6 : IpVersion::v4;
    s.protocol = (round / 2) % 2 ? IPPROTO_TCP : IPPROTO_UDP;
    s.src = random_address(s.version);
    s.dst = random_address(s.version);
    s.src_port = static_cast<std::uint16_t>(rng());
    s.dst_port = static_cast<std::uint16_t>(rng());
    s.hop_limit = static_cast<std::uint8_t>(2 + rng() % 254);
    s.payload.resize(rng() % 64);
    for (auto& b : s.payload) b = static_cast<std::uint8_t>(rng());
    if (s.version == IpVersion::v4) s.ipv4_option_bytes = 4 * (rng() % 3);
    auto f = build_frame(s);
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f.bytes, p), ParseError::none);
    for (int step = 0; step < 3; ++step) {
      switch (rng() % 3) {
        case 0:
          rewrite_endpoint(f.bytes, p, Side::destination, random_address(s.version),
                           static_cast<std::uint16_t>(rng()));
          break;
        case 1:
          rewrite_endpoint(f.bytes, p, Side::source, random_address(s.version),
                           static_cast<std::uint16_t>(rng()));
          break;
        default:
          if (p.hop_limit > 1) decrement_hop_limit(f.bytes, p);
      }
      ParsedPacket again;
      ASSERT_EQ(parse_frame(f.bytes, again), ParseError::none);
      EXPECT_EQ(again.src_address, p.src_address);
      EXPECT_EQ(again.dst_address, p.dst_address);
      EXPECT_EQ(again.src_port, p.src_port);
      EXPECT_EQ(again.dst_port, p.dst_port);
      EXPECT_EQ(again.hop_limit, p.hop_limit);
      auto want = test::reference_checksums(f.bytes, again);
      if (p.is_v4()) {
        ASSERT_EQ(stored16(f.bytes, p.l3_offset + 10), want.ipv4_header) << "round " << round;
      }
      ASSERT_EQ(stored16(f.bytes, p.l4_checksum_offset()), want.l4) << "round " << round;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12000);
}

TEST(ChecksumDelta, IncrementalUdpResultOfZeroIsWrittenAsAllOnes) {
  for (IpVersion v : {IpVersion::v4, IpVersion::v6}) {
    // Target frame T whose UDP checksum computes to 0 (sent as 0xffff), built as in
    // UdpComputedZeroIsSentAsAllOnes; then a frame differing only in the destination port is
    // rewritten into T incrementally.
    FrameSpec s;
    s.version = v;
    if (v == IpVersion::v6) {
      s.src = addr("2001:db8::1");
      s.dst = addr("2001:db8::2");
    }
    s.payload = {9, 9, 0, 0};
    auto target = build_frame(s);
    ParsedPacket tp;
    ASSERT_EQ(parse_frame(target.bytes, tp), ParseError::none);
    std::uint16_t c = l4_checksum(target.bytes, tp);
    s.payload[2] = static_cast<std::uint8_t>(c >> 8);
    s.payload[3] = static_cast<std::uint8_t>(c);
    std::uint16_t target_port = s.dst_port;
    s.dst_port = 1234;
    auto f = build_frame(s);
    ParsedPacket p;
    ASSERT_EQ(parse_frame(f.bytes, p), ParseError::none);
    rewrite_endpoint(f.bytes, p, Side::destination, p.dst_address, target_port);
    EXPECT_EQ(stored16(f.bytes, p.l4_checksum_offset()), 0xffff);
    EXPECT_EQ(test::reference_checksums(f.bytes, p).l4, 0xffff);
  }
}

TEST(ChecksumDelta, Ipv4UdpZeroChecksumStaysZero) {
  FrameSpec s;
  s.udp_no_checksum = true;
  auto f = build_frame(s);
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f.bytes, p), ParseError::none);
  ASSERT_EQ(stored16(f.bytes, p.l4_checksum_offset()), 0);
  rewrite_endpoint(f.bytes, p, Side::destination, addr("10.9.8.7"), 5353);
  rewrite_endpoint(f.bytes, p, Side::source, addr("10.1.1.1"), 1);
  EXPECT_EQ(stored16(f.bytes, p.l4_checksum_offset()), 0);
  // The IPv4 header checksum is still maintained.
  EXPECT_EQ(stored16(f.bytes, p.l3_offset + 10), test::reference_checksums(f.bytes, p).ipv4_header);
}

TEST(ChecksumDelta, TtlDecrementMatchesScapy) {
  // kUdp4 with ttl=63 instead of 64 has header checksum 0x9d87 (scapy:
  // IP(src="192.0.2.1", dst="10.0.0.10", ttl=63, id=0x1234)/UDP(...)/Raw(b"hello ferry")).
  auto f = test::kUdp4;
  ParsedPacket p;
  ASSERT_EQ(parse_frame(f, p), ParseError::none);
  decrement_hop_limit(f, p);
  EXPECT_EQ(f[p.l3_offset + 8], 63);
  EXPECT_EQ(stored16(f, p.l3_offset + 10), 0x9d87);
  EXPECT_EQ(p.hop_limit, 63);
}

}  // namespace
}  // namespace ferry::packet
