// Partial checksums (CHECKSUM_PARTIAL): frames captured from a veth and hand-computed sums are
// recognised, finished after a rewrite into checksums that verify, and never confused with full
// checksums, which keep the incremental update (a wrong one stays exactly as wrong).
#include <gtest/gtest.h>

#include <random>

#include "lib/packet/checksum.hh"
#include "lib/packet/rewrite.hh"
#include "tests/unit/packet/captured_frames.hh"
#include "tests/unit/packet/frame_builder.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::build_frame;
using test::FrameSpec;
using test::reference_checksums;
using test::stored16;

template <std::size_t N>
std::vector<std::uint8_t> bytes_of(const std::uint8_t (&frame)[N]) {
  return {frame, frame + N};
}

ParsedPacket parse(const std::vector<std::uint8_t>& f) {
  ParsedPacket p;
  EXPECT_EQ(parse_frame(f, p), ParseError::none);
  return p;
}

bool l4_verifies(const std::vector<std::uint8_t>& f, const ParsedPacket& p) {
  return stored16(f, p.l4_checksum_offset()) == reference_checksums(f, p).l4;
}

TEST(PartialChecksum, HandComputedPseudoHeaderSumOfTheCapturedIpv4Frame) {
  // 192.0.2.1 -> 192.0.2.2, UDP, length 24: c000 + 0201 + c000 + 0202 + 0011 + 0018 = 0x1842c,
  // folded 0x842c + 1 = 0x842d, which is what the kernel left in the captured frame.
  auto f = bytes_of(test::kCapturedPartialV4);
  ParsedPacket p = parse(f);
  EXPECT_EQ(pseudo_header_sum(p), 0x842d);
  EXPECT_EQ(stored16(f, p.l4_checksum_offset()), 0x842d);
}

TEST(PartialChecksum, FramesCapturedFromAVethAreClassifiedAsTheKernelBuiltThem) {
  auto v4 = bytes_of(test::kCapturedPartialV4);
  auto v6 = bytes_of(test::kCapturedPartialV6);
  auto full = bytes_of(test::kCapturedFullV4);
  EXPECT_EQ(classify_l4_checksum(v4, parse(v4)), L4Checksum::partial);
  EXPECT_EQ(classify_l4_checksum(v6, parse(v6)), L4Checksum::partial);
  EXPECT_EQ(classify_l4_checksum(full, parse(full)), L4Checksum::full);
  EXPECT_TRUE(l4_verifies(full, parse(full)));
  EXPECT_FALSE(l4_verifies(v4, parse(v4)));
}

TEST(PartialChecksum, CapturedPartialFramesVerifyOnceRewrittenAndFinished) {
  for (auto f : {bytes_of(test::kCapturedPartialV4), bytes_of(test::kCapturedPartialV6)}) {
    ParsedPacket p = parse(f);
    ASSERT_EQ(classify_l4_checksum(f, p), L4Checksum::partial);
    auto backend = p.is_v4() ? addr("10.0.1.2") : addr("2001:db8:1::2");
    rewrite_endpoint(f, p, Side::destination, backend, 5353);
    finish_l4_checksum(f, p);
    EXPECT_TRUE(l4_verifies(f, p)) << (p.is_v4() ? "v4" : "v6");
    if (p.is_v4()) {
      EXPECT_EQ(stored16(f, p.l3_offset + 10), reference_checksums(f, p).ipv4_header);
    }
  }
}

TEST(PartialChecksum, TheCapturedFullFrameKeepsAValidChecksumWithoutFinishing) {
  auto f = bytes_of(test::kCapturedFullV4);
  ParsedPacket p = parse(f);
  rewrite_endpoint(f, p, Side::destination, addr("10.0.1.2"), 5353);
  EXPECT_TRUE(l4_verifies(f, p));
}

TEST(PartialChecksum, Ipv4ZeroIsNoChecksumAndIpv6ZeroIsComputed) {
  FrameSpec s;
  s.udp_no_checksum = true;
  auto v4 = build_frame(s).bytes;
  ParsedPacket p4 = parse(v4);
  EXPECT_EQ(classify_l4_checksum(v4, p4), L4Checksum::none);
  EXPECT_FALSE(needs_finishing(L4Checksum::none));
  rewrite_endpoint(v4, p4, Side::destination, addr("10.0.1.2"), 53);
  EXPECT_EQ(stored16(v4, p4.l4_checksum_offset()), 0) << "stays 0";

  s.version = IpVersion::v6;
  s.src = addr("2001:db8::1");
  s.dst = addr("2001:db8::10");
  auto v6 = build_frame(s).bytes;
  ParsedPacket p6 = parse(v6);
  ASSERT_EQ(stored16(v6, p6.l4_checksum_offset()), 0);
  EXPECT_EQ(classify_l4_checksum(v6, p6), L4Checksum::ipv6_zero);
  rewrite_endpoint(v6, p6, Side::destination, addr("2001:db8:1::2"), 53);
  finish_l4_checksum(v6, p6);
  EXPECT_NE(stored16(v6, p6.l4_checksum_offset()), 0);
  EXPECT_TRUE(l4_verifies(v6, p6));
}

// Random datagrams (both versions, 0-1400 payload bytes, random addresses, ports and rewrites):
// a partial one always verifies once finished, a full one always verifies after the incremental
// update, and a wrong one (not hitting the signature) is exactly as wrong after it.
TEST(PartialChecksum, PropertyFinishedAlwaysVerifiesAndWrongStaysWrong) {
  std::mt19937 rng(20261201);
  auto random_address = [&](IpVersion v) {
    std::array<std::uint8_t, 16> a{};
    for (std::size_t i = 0; i < (v == IpVersion::v4 ? 4u : 16u); ++i) a[i] = rng() & 0xff;
    return a;
  };
  int partial_checked = 0, wrong_checked = 0;
  for (int round = 0; round < 3000; ++round) {
    FrameSpec s;
    s.version = round % 2 ? IpVersion::v6 : IpVersion::v4;
    s.src = random_address(s.version);
    s.dst = random_address(s.version);
    s.src_port = rng() & 0xffff;
    s.dst_port = rng() & 0xffff;
    s.payload.resize(rng() % 1401);
    for (auto& b : s.payload) b = rng() & 0xff;
    auto built = build_frame(s).bytes;
    ParsedPacket original = parse(built);
    Side side = rng() % 2 ? Side::source : Side::destination;
    auto to = random_address(s.version);
    std::uint16_t port = rng() & 0xffff;

    s.partial_checksum = true;  // the same datagram as a sender with checksum offload sends it
    auto partial = build_frame(s).bytes;
    ParsedPacket pp = original;
    ASSERT_EQ(classify_l4_checksum(partial, pp), L4Checksum::partial);
    rewrite_endpoint(partial, pp, side, to, port);
    finish_l4_checksum(partial, pp);
    ASSERT_TRUE(l4_verifies(partial, pp)) << "round " << round;
    ++partial_checked;

    auto full = built;
    ParsedPacket pf = original;
    if (classify_l4_checksum(full, pf) == L4Checksum::full) {  // 1 in 65,536 hits the signature
      rewrite_endpoint(full, pf, side, to, port);
      ASSERT_TRUE(l4_verifies(full, pf)) << "round " << round;
    }

    auto wrong = built;
    ParsedPacket pw = original;
    std::uint16_t good = stored16(wrong, pw.l4_checksum_offset());
    std::uint16_t bad = static_cast<std::uint16_t>(good ^ (1u + rng() % 0xfffe));
    if (bad == 0 || bad == pseudo_header_sum(pw) || bad == 0xffff || good == 0xffff) continue;
    test::put16(wrong, pw.l4_checksum_offset(), bad);
    ASSERT_EQ(classify_l4_checksum(wrong, pw), L4Checksum::full);
    rewrite_endpoint(wrong, pw, side, to, port);
    std::uint16_t after = stored16(wrong, pw.l4_checksum_offset());
    std::uint16_t correct = reference_checksums(wrong, pw).l4;
    ASSERT_NE(after, correct) << "round " << round << ": a corrupt datagram became valid";
    // The error is carried, not changed: sums differ from the correct ones by the same amount.
    auto ones_diff = [](std::uint16_t a, std::uint16_t b) {
      return fold_checksum(std::uint64_t{a} + static_cast<std::uint16_t>(~b));
    };
    std::uint16_t before_error = ones_diff(bad, good), after_error = ones_diff(after, correct);
    if (after != 0xffff && correct != 0xffff) {
      EXPECT_EQ(before_error, after_error) << round;
    }
    ++wrong_checked;
  }
  EXPECT_EQ(partial_checked, 3000);
  EXPECT_GT(wrong_checked, 2900);
}

}  // namespace
}  // namespace ferry::packet
