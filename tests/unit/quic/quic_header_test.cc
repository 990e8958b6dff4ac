// parse_quic_header over long and short headers, version negotiation, DCID lengths past 20 and
// every truncation; each case asserts the DCID found lies inside the payload.
#include "lib/quic/quic_header.hh"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/quic/quic_test_support.hh"

namespace ferry::quic {
namespace {

using test::hex;

bool inside(std::span<const std::uint8_t> part, const std::vector<std::uint8_t>& whole) {
  return part.empty() ||
         (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

// QUIC v1 Initial: 0xc3, version 1, DCID length 8, DCID, SCID length 0, then the rest.
const std::vector<std::uint8_t> kInitial =
    hex("c300000001"
        "08"
        "0102030405060708"
        "00"
        "4141");

TEST(QuicHeader, LongHeaderGivesVersionAndTheDcidItDeclares) {
  QuicHeader h = parse_quic_header(kInitial);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_EQ(h.form, HeaderForm::long_header);
  EXPECT_EQ(h.version, 1u);
  ASSERT_EQ(h.dcid.size(), 8u);
  EXPECT_EQ(h.dcid.data(), kInitial.data() + 6);
  EXPECT_EQ(test::to_hex(h.dcid.data(), h.dcid.size()), "0102030405060708");
}

TEST(QuicHeader, LongHeaderOfAnUnknownVersionStillGivesItsDcid) {
  auto p =
      hex("ff6b3343cf"
          "04"
          "aabbccdd"
          "00");  // QUIC v2's number, any version works
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_EQ(h.version, 0x6b3343cfu);
  EXPECT_EQ(test::to_hex(h.dcid.data(), h.dcid.size()), "aabbccdd");
}

TEST(QuicHeader, LongHeaderWithEmptyDcidIsOkAndEmpty) {
  auto p =
      hex("c000000001"
          "00"
          "00");
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_TRUE(h.dcid.empty());
}

TEST(QuicHeader, LongHeaderDcidOfExactly20IsAccepted) {
  auto p =
      hex("c000000001"
          "14"
          "000102030405060708090a0b0c0d0e0f10111213");
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_EQ(h.dcid.size(), 20u);
  EXPECT_TRUE(inside(h.dcid, p));
}

TEST(QuicHeader, LongHeaderDcidOver20IsRefusedEvenWhenPresent) {
  std::vector<std::uint8_t> p =
      hex("c000000001"
          "15");
  p.resize(p.size() + 21 + 10, 0xab);
  EXPECT_EQ(parse_quic_header(p).status, HeaderStatus::dcid_too_long);
  p[5] = 0xff;
  EXPECT_EQ(parse_quic_header(p).status, HeaderStatus::dcid_too_long);
}

TEST(QuicHeader, VersionZeroIsVersionNegotiation) {
  auto p =
      hex("8000000000"
          "08"
          "0102030405060708"
          "00");
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::version_negotiation);
  EXPECT_EQ(h.form, HeaderForm::long_header);
}

TEST(QuicHeader, EveryTruncationOfALongHeaderIsTruncated) {
  // Cut before the DCID ends: truncated; from the full DCID on: ok.
  for (std::size_t n = 1; n < kInitial.size(); ++n) {
    std::vector<std::uint8_t> cut(kInitial.begin(), kInitial.begin() + n);
    QuicHeader h = parse_quic_header(cut);
    if (n < 6 + 8) {
      EXPECT_EQ(h.status, HeaderStatus::truncated) << n;
      EXPECT_TRUE(h.dcid.empty());
    } else {
      EXPECT_EQ(h.status, HeaderStatus::ok) << n;
      EXPECT_TRUE(inside(h.dcid, cut));
    }
  }
}

TEST(QuicHeader, EmptyDatagramIsNotQuic) {
  EXPECT_EQ(parse_quic_header({}).status, HeaderStatus::not_quic);
}

TEST(QuicHeader, ShortHeaderOffersTheOctetsAfterTheFirstUpTo20) {
  auto p =
      hex("41"
          "0720b1d07b359d3c"
          "deadbeef");
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_EQ(h.form, HeaderForm::short_header);
  EXPECT_EQ(h.dcid.data(), p.data() + 1);
  EXPECT_EQ(h.dcid.size(), p.size() - 1);

  std::vector<std::uint8_t> big(1200, 0x11);
  big[0] = 0x40;
  QuicHeader b = parse_quic_header(big);
  EXPECT_EQ(b.dcid.size(), 20u);
}

TEST(QuicHeader, ShortHeaderOfOneOctetHasNoDcidOctets) {
  auto p = hex("40");
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_TRUE(h.dcid.empty());
}

// The draft (appendix C) reads any first octet below 0x80 as a short header, DTLS records too.
TEST(QuicHeader, FixedBitClearIsStillAShortHeader) {
  auto p = hex("17fefd0001");
  QuicHeader h = parse_quic_header(p);
  EXPECT_EQ(h.status, HeaderStatus::ok);
  EXPECT_EQ(h.form, HeaderForm::short_header);
}

}  // namespace
}  // namespace ferry::quic
