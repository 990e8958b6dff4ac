// The PROXY protocol header builder and parser (lib/proxy/proxy_header) against the layout of
// HAProxy's proxy-protocol.txt: v1 lines exactly, v2 headers byte for byte, every rejection.
#include "lib/proxy/proxy_header.hh"

#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

namespace ferry::proxy::pp {
namespace {

using namespace std::literals;

net::Endpoint ep(const char* text) {
  return *net::Endpoint::parse(text);
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

ParseResult parse_text(std::string_view s) {
  return parse(bytes_of(s));
}

std::vector<std::uint8_t> v2_bytes(std::initializer_list<int> tail) {
  std::vector<std::uint8_t> out(kV2Signature.begin(), kV2Signature.end());
  for (int b : tail) out.push_back(static_cast<std::uint8_t>(b));
  return out;
}

TEST(ProxyHeaderV1, BuildsTheExactTcp4Line) {
  EXPECT_EQ(build_v1(ep("192.168.0.1:56324"), ep("192.168.0.11:443")).text(),
            "PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\n");
  EXPECT_EQ(build_v1(ep("255.255.255.255:65535"), ep("255.255.255.255:65535")).text(),
            "PROXY TCP4 255.255.255.255 255.255.255.255 65535 65535\r\n");
  EXPECT_EQ(build_v1(ep("0.0.0.0:0"), ep("10.0.0.1:7")).text(),
            "PROXY TCP4 0.0.0.0 10.0.0.1 0 7\r\n");
}

TEST(ProxyHeaderV1, BuildsTheExactTcp6LineInCanonicalForm) {
  EXPECT_EQ(build_v1(ep("[2001:db8::1]:40000"), ep("[2001:db8:0:0:0:0:0:ff]:80")).text(),
            "PROXY TCP6 2001:db8::1 2001:db8::ff 40000 80\r\n");
  const Built longest = build_v1(ep("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"),
                                 ep("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"));
  EXPECT_EQ(longest.size, 104u);  // the specification's TCP/IPv6 maximum
}

TEST(ProxyHeaderV1, MixedFamiliesAndUnknownEndsAreUnknown) {
  EXPECT_EQ(build_v1(ep("10.0.0.1:1"), ep("[::1]:2")).text(), "PROXY UNKNOWN\r\n");
  EXPECT_EQ(build_unknown(Version::v1).text(), "PROXY UNKNOWN\r\n");
}

TEST(ProxyHeaderV2, Tcp4HeaderIsTheSpecificationsLayoutByteForByte) {
  const Built h = build_v2(ep("192.168.0.1:56324"), ep("192.168.0.11:443"));
  const std::vector<std::uint8_t> expected = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                              0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A,  // signature
                                              0x21,                                // v2, PROXY
                                              0x11,                                // TCP over IPv4
                                              0x00, 0x0C,            // 12 bytes follow
                                              192,  168,  0,    1,   // source
                                              192,  168,  0,    11,  // destination
                                              0xDC, 0x04,            // 56324
                                              0x01, 0xBB};           // 443
  ASSERT_EQ(h.size, expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(h.bytes[i], expected[i]) << "byte " << i;
}

TEST(ProxyHeaderV2, Tcp6HeaderIsTheSpecificationsLayoutByteForByte) {
  const Built h = build_v2(ep("[2001:db8::1]:1"), ep("[2001:db8::2]:65535"));
  std::vector<std::uint8_t> expected = v2_bytes({0x21, 0x21, 0x00, 0x24});  // v2 PROXY, TCP6, 36
  for (int last : {1, 2}) {
    const std::uint8_t a[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                0,    0,    0,    0,    0, 0, 0, static_cast<std::uint8_t>(last)};
    expected.insert(expected.end(), a, a + 16);
  }
  for (int b : {0x00, 0x01, 0xFF, 0xFF}) expected.push_back(static_cast<std::uint8_t>(b));
  ASSERT_EQ(h.size, 52u);
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(h.bytes[i], expected[i]) << "byte " << i;
}

TEST(ProxyHeaderV2, LocalAndUnspecHeadersCarryNoAddresses) {
  const Built local = build_v2_local();
  EXPECT_EQ(std::vector<std::uint8_t>(local.view().begin(), local.view().end()),
            v2_bytes({0x20, 0x00, 0x00, 0x00}));
  const Built unknown = build_unknown(Version::v2);
  EXPECT_EQ(std::vector<std::uint8_t>(unknown.view().begin(), unknown.view().end()),
            v2_bytes({0x21, 0x00, 0x00, 0x00}));
  const Built mixed = build_v2(ep("10.0.0.1:1"), ep("[::1]:2"));
  EXPECT_EQ(mixed.size, 16u);
  EXPECT_EQ(mixed.bytes[13], 0x00);
}

// Every header ferry builds parses back to its addresses, whole and after any split.
TEST(ProxyHeaderParse, BuiltHeadersRoundTripAtEverySplit) {
  const std::pair<const char*, const char*> ends[] = {
      {"192.168.0.1:56324", "192.168.0.11:443"},
      {"[2001:db8::1]:40000", "[2001:db8::ff]:80"},
      {"[::ffff:10.1.2.3]:5", "[::ffff:10.1.2.4]:6"}};
  for (auto [src, dst] : ends) {
    for (Version v : {Version::v1, Version::v2}) {
      const Built h = build(v, ep(src), ep(dst));
      std::vector<std::uint8_t> wire(h.view().begin(), h.view().end());
      wire.insert(wire.end(), {'G', 'E', 'T'});  // client data after the header
      for (std::size_t cut = 0; cut < h.size; ++cut) {
        EXPECT_EQ(parse(std::span(wire.data(), cut)).status, Status::need_more)
            << src << " " << cut;
      }
      const ParseResult r = parse(wire);
      ASSERT_EQ(r.status, Status::done) << r.why;
      EXPECT_EQ(r.version, v);
      EXPECT_EQ(r.consumed, h.size);
      EXPECT_TRUE(r.has_addresses);
      EXPECT_EQ(r.source, ep(src));
      EXPECT_EQ(r.destination, ep(dst));
    }
  }
}

TEST(ProxyHeaderParse, V1UnknownIsDoneWithoutAddresses) {
  for (std::string_view line : {"PROXY UNKNOWN\r\n", "PROXY UNKNOWN anything at all here\r\n"}) {
    const ParseResult r = parse_text(line);
    ASSERT_EQ(r.status, Status::done) << line;
    EXPECT_EQ(r.consumed, line.size());
    EXPECT_FALSE(r.has_addresses);
  }
}

TEST(ProxyHeaderParse, V1AcceptsTheLongestLines) {
  std::string longest =
      "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff "
      "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
  ASSERT_EQ(longest.size(), kV1MaxBytes);
  EXPECT_EQ(parse_text(longest).status, Status::done);
  longest.replace(6, 7, "TCP6");
  EXPECT_EQ(parse_text(longest).status, Status::done);
  EXPECT_EQ(parse_text(longest).source.port, 65535);
}

struct Bad {
  std::string_view input;
  Reject reason;
};

TEST(ProxyHeaderParse, V1RejectsEveryDeviationFromTheGrammar) {
  const Bad cases[] = {
      {"GET / HTTP/1.1\r\n", Reject::absent},
      {"PROX", Reject::none},  // a prefix: need more
      {"PROXZ", Reject::absent},
      {"proxy TCP4 1.2.3.4 5.6.7.8 1 2\r\n", Reject::absent},
      {"PROXY\r\n", Reject::malformed},
      {"PROXY  TCP4 1.2.3.4 5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY TCP5 1.2.3.4 5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY tcp4 1.2.3.4 5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n", Reject::malformed},     // LF alone
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rX", Reject::malformed},    // CR alone
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n", Reject::malformed},  // trailing space
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.04 5.6.7.8 1 2\r\n", Reject::malformed},  // heading zero
      {"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4.5 5.6.7.8 1 2\r\n", Reject::malformed},
      {"PROXY TCP4 ::1 5.6.7.8 1 2\r\n", Reject::malformed},  // family mismatch
      {"PROXY TCP6 1.2.3.4 ::1 1 2\r\n", Reject::malformed},
      {"PROXY TCP6 ::1 ::1%lo 1 2\r\n", Reject::malformed},
      {"PROXY TCP6 ::1 1::2::3 1 2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n", Reject::malformed},  // heading zero
      {"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 -2\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 2x\r\n", Reject::malformed},
      {"PROXY UNKNOWNX\r\n", Reject::malformed},
      {"PROXY TCP4 1.2.3.4 5.6.7.8 1 \0\r\n"sv, Reject::malformed},
  };
  for (const Bad& b : cases) {
    const ParseResult r = parse_text(b.input);
    if (b.reason == Reject::none) {
      EXPECT_EQ(r.status, Status::need_more) << b.input;
      continue;
    }
    EXPECT_EQ(r.status, Status::rejected) << b.input;
    EXPECT_EQ(r.reason, b.reason) << b.input << ": " << r.why;
    EXPECT_NE(std::string_view(r.why), "");
  }
}

TEST(ProxyHeaderParse, V1WithoutCrlfIn107BytesIsTooLong) {
  std::string line = "PROXY TCP4 " + std::string(95, '1');
  ASSERT_EQ(line.size(), 106u);
  EXPECT_EQ(parse_text(line).status, Status::need_more);
  line += "1";
  EXPECT_EQ(parse_text(line).reason, Reject::too_long);
  EXPECT_EQ(parse_text(line + "\r\n").reason, Reject::too_long);
  // 106 bytes before the CRLF: 108 in all, one more than the longest line (a fuzzer finding).
  line.pop_back();
  EXPECT_EQ(parse_text(line).status, Status::need_more);
  EXPECT_EQ(parse_text(line + "\r").reason, Reject::too_long);
  EXPECT_EQ(parse_text(line + "\r\n").reason, Reject::too_long);
}

TEST(ProxyHeaderParse, V2LocalSkipsItsLengthAndIgnoresAddresses) {
  std::vector<std::uint8_t> h = v2_bytes({0x20, 0x11, 0x00, 0x0C});
  for (int i = 0; i < 12; ++i) h.push_back(0xAA);
  h.push_back('x');
  const ParseResult r = parse(h);
  ASSERT_EQ(r.status, Status::done) << r.why;
  EXPECT_EQ(r.consumed, 28u);
  EXPECT_FALSE(r.has_addresses);
}

TEST(ProxyHeaderParse, V2SkipsTlvsAndFallsBackForOtherFamilies) {
  // TCP4 with a NOOP TLV (3 bytes of padding) and an AUTHORITY TLV.
  std::vector<std::uint8_t> h = v2_bytes({0x21, 0x11, 0x00, 12 + 6 + 7});
  for (int b : {10, 0, 0, 1, 10, 0, 0, 2, 0x12, 0x34, 0x00, 0x50})
    h.push_back(static_cast<std::uint8_t>(b));
  for (int b : {0x04, 0x00, 0x03, 0, 0, 0, 0x02, 0x00, 0x04, 0x61, 0x62, 0x63, 0x64}) {
    h.push_back(static_cast<std::uint8_t>(b));
  }
  ParseResult r = parse(h);
  ASSERT_EQ(r.status, Status::done) << r.why;
  EXPECT_EQ(r.consumed, h.size());
  EXPECT_EQ(r.source, ep("10.0.0.1:4660"));
  EXPECT_EQ(r.destination, ep("10.0.0.2:80"));
  // UDP over IPv4 still carries addresses; AF_UNIX (216 bytes) and UNSPEC fall back.
  h[13] = 0x12;
  EXPECT_TRUE(parse(h).has_addresses);
  std::vector<std::uint8_t> unix_header = v2_bytes({0x21, 0x31, 0x00, 216});
  unix_header.resize(16 + 216, 0);
  r = parse(unix_header);
  ASSERT_EQ(r.status, Status::done) << r.why;
  EXPECT_FALSE(r.has_addresses);
  r = parse(v2_bytes({0x21, 0x00, 0x00, 0x00}));
  ASSERT_EQ(r.status, Status::done);
  EXPECT_FALSE(r.has_addresses);
}

TEST(ProxyHeaderParse, V2RejectsEveryInvalidField) {
  struct Case {
    std::vector<std::uint8_t> bytes;
    Reject reason;
  };
  std::vector<std::uint8_t> wrong_signature = v2_bytes({});
  wrong_signature[4] = 0x01;
  std::vector<std::uint8_t> tcp4 = v2_bytes({0x21, 0x11, 0x00, 0x0C});
  tcp4.resize(28, 0);
  std::vector<std::uint8_t> bad_tlv = v2_bytes({0x21, 0x11, 0x00, 14});
  bad_tlv.resize(30, 0);  // 2 bytes after the addresses: less than a TLV's 3
  std::vector<std::uint8_t> overrun = v2_bytes({0x21, 0x11, 0x00, 16});
  overrun.resize(32, 0);
  overrun[28] = 0x04;
  overrun[30] = 0x02;  // a 2-byte value where 1 byte is left
  const Case cases[] = {
      {wrong_signature, Reject::absent},
      {{0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0B}, Reject::absent},
      {v2_bytes({0x11}), Reject::malformed},  // version 1 in the binary format
      {v2_bytes({0x31}), Reject::malformed},  // version 3
      {v2_bytes({0x22}), Reject::malformed},  // command 2
      {v2_bytes({0x2F}), Reject::malformed},
      {v2_bytes({0x21, 0x13}), Reject::malformed},              // transport 3
      {v2_bytes({0x21, 0x41}), Reject::malformed},              // family 4
      {v2_bytes({0x21, 0x01}), Reject::malformed},              // UNSPEC family with STREAM
      {v2_bytes({0x21, 0x11, 0x00, 0x0B}), Reject::malformed},  // shorter than 12
      {v2_bytes({0x21, 0x21, 0x00, 0x0C}), Reject::malformed},  // shorter than 36
      {v2_bytes({0x21, 0x11, 0x02, 0x09}), Reject::too_long},   // 521
      {v2_bytes({0x20, 0x00, 0xFF, 0xFF}), Reject::too_long},
      {bad_tlv, Reject::malformed},
      {overrun, Reject::malformed},
  };
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const ParseResult r = parse(cases[i].bytes);
    EXPECT_EQ(r.status, Status::rejected) << "case " << i;
    EXPECT_EQ(r.reason, cases[i].reason) << "case " << i << ": " << r.why;
  }
  EXPECT_EQ(parse(tcp4).status, Status::done);
}

TEST(ProxyHeaderParse, V2AcceptsTheLargestLengthAndNeedsAllOfIt) {
  std::vector<std::uint8_t> h = v2_bytes({0x21, 0x11, 0x02, 0x08});  // 520
  h.resize(16 + 12, 0);
  h.insert(h.end(), {0x04, 0x01, 0xF9});  // NOOP of 505 bytes fills the rest
  h.resize(kMaxHeaderBytes, 0);
  EXPECT_EQ(parse(std::span(h.data(), h.size() - 1)).status, Status::need_more);
  const ParseResult r = parse(h);
  ASSERT_EQ(r.status, Status::done) << r.why;
  EXPECT_EQ(r.consumed, kMaxHeaderBytes);
}

TEST(ProxyHeaderParse, AnythingElseIsAbsentFromTheFirstByte) {
  EXPECT_EQ(parse_text("").status, Status::need_more);
  for (std::string_view s : {"\x16\x03\x01", "G", "SSH-2.0", "\r\n\r\nX"}) {
    EXPECT_EQ(parse_text(s).reason, Reject::absent) << s;
  }
  EXPECT_EQ(to_string(Reject::absent), "absent");
  EXPECT_EQ(to_string(Reject::too_long), "too_long");
}

}  // namespace
}  // namespace ferry::proxy::pp
