// Parser vectors: IPv4/IPv6/UDP/TCP, VLAN/QinQ, truncation at every byte, bad lengths, and the
// frames that belong to the kernel (fragments, extension headers, other protocols).
#include "lib/packet/parse.hh"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "tests/unit/packet/frame_builder.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::build_frame;
using test::FrameSpec;

ParseError parse(const std::vector<std::uint8_t>& f, ParsedPacket& p) {
  return parse_frame(f, p);
}
ParseError parse(const std::vector<std::uint8_t>& f) {
  ParsedPacket p;
  return parse_frame(f, p);
}

TEST(Parse, Ipv4UdpVectorGivesEveryOffsetAndTheTuple) {
  ParsedPacket p;
  ASSERT_EQ(parse(test::kUdp4, p), ParseError::none);
  EXPECT_EQ(p.frame_bytes, 53u);
  EXPECT_EQ(p.l3_offset, 14u);
  EXPECT_EQ(p.l3_bytes, 39u);
  EXPECT_EQ(p.l4_offset, 34u);
  EXPECT_EQ(p.l4_bytes, 19u);
  EXPECT_EQ(p.payload_offset, 42u);
  EXPECT_EQ(p.payload_bytes, 11u);
  EXPECT_EQ(p.ethertype, kEthertypeIpv4);
  EXPECT_EQ(p.vlan_count, 0);
  EXPECT_EQ(p.version, IpVersion::v4);
  EXPECT_EQ(p.protocol, IPPROTO_UDP);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.src_address, addr("192.0.2.1"));
  EXPECT_EQ(p.dst_address, addr("10.0.0.10"));
  EXPECT_EQ(p.source_ip(), *net::IpAddress::parse("192.0.2.1"));
  EXPECT_EQ(p.destination_ip(), *net::IpAddress::parse("10.0.0.10"));
  EXPECT_EQ(p.src_port, 40000);
  EXPECT_EQ(p.dst_port, 53);
  EXPECT_EQ(std::string(test::kUdp4.begin() + p.payload_offset, test::kUdp4.end()), "hello ferry");
}

TEST(Parse, Ipv6UdpVector) {
  ParsedPacket p;
  ASSERT_EQ(parse(test::kUdp6, p), ParseError::none);
  EXPECT_EQ(p.version, IpVersion::v6);
  EXPECT_EQ(p.l3_offset, 14u);
  EXPECT_EQ(p.l3_bytes, 60u);
  EXPECT_EQ(p.l4_offset, 54u);
  EXPECT_EQ(p.l4_bytes, 20u);
  EXPECT_EQ(p.payload_offset, 62u);
  EXPECT_EQ(p.payload_bytes, 12u);
  EXPECT_EQ(p.hop_limit, 64);
  EXPECT_EQ(p.src_address, addr("2001:db8::1"));
  EXPECT_EQ(p.dst_address, addr("2001:db8:ffff::10"));
  EXPECT_EQ(p.destination_ip().to_string(), "2001:db8:ffff::10");
  EXPECT_EQ(p.src_port, 40000);
  EXPECT_EQ(p.dst_port, 53);
  EXPECT_EQ(p.src_address_offset(), 22u);
  EXPECT_EQ(p.dst_address_offset(), 38u);
}

TEST(Parse, Ipv4TcpVector) {
  ParsedPacket p;
  ASSERT_EQ(parse(test::kTcp4, p), ParseError::none);
  EXPECT_EQ(p.protocol, IPPROTO_TCP);
  EXPECT_EQ(p.l4_offset, 34u);
  EXPECT_EQ(p.payload_offset, 54u);
  EXPECT_EQ(p.payload_bytes, 3u);
  EXPECT_EQ(p.dst_port, 80);
  EXPECT_EQ(p.l4_checksum_offset(), 50u);
}

TEST(Parse, QinQVectorGivesBothVlanIdsOutermostFirst) {
  ParsedPacket p;
  ASSERT_EQ(parse(test::kQinQUdp4, p), ParseError::none);
  EXPECT_EQ(p.vlan_count, 2);
  EXPECT_EQ(p.vlan_ids[0], 100);
  EXPECT_EQ(p.vlan_ids[1], 200);
  EXPECT_EQ(p.l3_offset, 22u);
  EXPECT_EQ(p.l4_offset, 42u);
  EXPECT_EQ(p.payload_bytes, 1u);
}

TEST(Parse, Ipv4OptionsMoveTheL4Offset) {
  ParsedPacket p;
  ASSERT_EQ(parse(test::kUdp4Ihl6, p), ParseError::none);
  EXPECT_EQ(p.l4_offset, 14u + 24u);
  EXPECT_EQ(p.src_port, 1);
  EXPECT_EQ(p.dst_port, 2);
  for (std::uint32_t option_bytes = 0; option_bytes <= 40; option_bytes += 4) {
    FrameSpec s;
    s.ipv4_option_bytes = option_bytes;
    auto f = build_frame(s);
    ASSERT_EQ(parse(f.bytes, p), ParseError::none) << "IHL " << (20 + option_bytes) / 4;
    EXPECT_EQ(p.l4_offset, 14u + 20u + option_bytes);
    EXPECT_EQ(p.payload_bytes, 4u);
    EXPECT_EQ(p.dst_port, 53);
  }
}

TEST(Parse, SingleVlanTagEitherTpid) {
  for (std::uint16_t tpid : {kEthertypeVlan, kEthertypeQinQ}) {
    FrameSpec s;
    s.vlan_tpids = {tpid};
    s.vlan_ids = {0x2000 | 42};  // PCP bits must not leak into the VID
    auto f = build_frame(s);
    ParsedPacket p;
    ASSERT_EQ(parse(f.bytes, p), ParseError::none);
    EXPECT_EQ(p.vlan_count, 1);
    EXPECT_EQ(p.vlan_ids[0], 42);
    EXPECT_EQ(p.l3_offset, 18u);
  }
}

TEST(Parse, ThirdVlanTagIsTooMany) {
  FrameSpec s;
  s.vlan_tpids = {kEthertypeQinQ, kEthertypeVlan, kEthertypeVlan};
  s.vlan_ids = {1, 2, 3};
  EXPECT_EQ(parse(build_frame(s).bytes), ParseError::too_many_vlans);
  EXPECT_FALSE(passes_to_kernel(ParseError::too_many_vlans));
}

TEST(Parse, TcpWithOptionsAndIpv6Tcp) {
  for (IpVersion v : {IpVersion::v4, IpVersion::v6}) {
    FrameSpec s;
    s.version = v;
    if (v == IpVersion::v6) {
      s.src = addr("2001:db8::1");
      s.dst = addr("2001:db8::2");
    }
    s.protocol = IPPROTO_TCP;
    s.tcp_option_bytes = 12;
    auto f = build_frame(s);
    ParsedPacket p;
    ASSERT_EQ(parse(f.bytes, p), ParseError::none);
    EXPECT_EQ(p.payload_offset, p.l4_offset + 32);
    EXPECT_EQ(p.payload_bytes, 4u);
  }
}

TEST(Parse, EthernetPaddingIsNotPayload) {
  FrameSpec s;
  s.payload = {'x'};
  s.pad_to_bytes = 60;
  auto f = build_frame(s);
  ASSERT_EQ(f.bytes.size(), 60u);
  ParsedPacket p;
  ASSERT_EQ(parse(f.bytes, p), ParseError::none);
  EXPECT_EQ(p.frame_bytes, 60u);
  EXPECT_EQ(p.l3_bytes, 29u);
  EXPECT_EQ(p.payload_bytes, 1u);
}

// Cutting a frame short at every length must give the reason for the header it cut into (or,
// once the IP header is whole, the length-field mismatch), and never read past the cut.
TEST(Parse, TruncationAtEveryByteNamesTheHeader) {
  struct Case {
    const char* name;
    FrameSpec spec;
  };
  std::vector<Case> cases;
  cases.push_back({"ipv4/udp", FrameSpec{}});
  FrameSpec qinq;
  qinq.vlan_tpids = {kEthertypeQinQ, kEthertypeVlan};
  qinq.vlan_ids = {10, 20};
  cases.push_back({"qinq ipv4/udp", qinq});
  FrameSpec v6;
  v6.version = IpVersion::v6;
  v6.src = addr("2001:db8::1");
  v6.dst = addr("2001:db8::2");
  v6.protocol = IPPROTO_TCP;
  cases.push_back({"ipv6/tcp", v6});
  for (const Case& c : cases) {
    auto full = build_frame(c.spec);
    ASSERT_EQ(parse(full.bytes), ParseError::none) << c.name;
    std::size_t l2_end = full.l3_offset;
    std::size_t l3_min_end = full.l3_offset + (c.spec.version == IpVersion::v4 ? 20 : 40);
    for (std::size_t len = 0; len < full.bytes.size(); ++len) {
      // A heap copy of exactly `len` bytes so ASan catches any read past the end.
      std::vector<std::uint8_t> cut(full.bytes.begin(), full.bytes.begin() + len);
      ParseError want;
      if (len < 14) {
        want = ParseError::truncated_ethernet;
      } else if (len < l2_end) {
        want = ParseError::truncated_vlan;
      } else if (len < l3_min_end) {
        want = c.spec.version == IpVersion::v4 ? ParseError::truncated_ipv4
                                               : ParseError::truncated_ipv6;
      } else {
        want = c.spec.version == IpVersion::v4 ? ParseError::bad_ipv4_length
                                               : ParseError::bad_ipv6_length;
      }
      EXPECT_EQ(parse(cut), want) << c.name << " cut to " << len << " bytes";
    }
  }
}

TEST(Parse, Ipv4HeaderFieldErrors) {
  auto base = build_frame(FrameSpec{});
  std::size_t l3 = base.l3_offset;
  {
    auto f = base.bytes;
    f[l3] = 0x44;  // IHL 4
    EXPECT_EQ(parse(f), ParseError::bad_ihl);
  }
  {
    auto f = base.bytes;
    f[l3] = 0x40;  // IHL 0
    EXPECT_EQ(parse(f), ParseError::bad_ihl);
  }
  {
    auto f = base.bytes;
    f[l3] = 0x4f;  // IHL 15 = 60 bytes, more than the 32-byte packet holds
    EXPECT_EQ(parse(f), ParseError::truncated_ipv4);
  }
  {
    auto f = base.bytes;
    f[l3] = 0x65;  // version 6 behind ethertype 0x0800
    EXPECT_EQ(parse(f), ParseError::bad_ip_version);
  }
  {
    auto f = base.bytes;
    test::put16(f, l3 + 2, 19);  // total length shorter than the header
    EXPECT_EQ(parse(f), ParseError::bad_ipv4_length);
  }
  {
    auto f = base.bytes;
    test::put16(f, l3 + 2, static_cast<std::uint16_t>(f.size() - l3 + 1));  // one past the frame
    EXPECT_EQ(parse(f), ParseError::bad_ipv4_length);
  }
  {
    auto f = base.bytes;
    test::put16(f, l3 + 2, 20);  // only the header: no room for UDP
    EXPECT_EQ(parse(f), ParseError::truncated_udp);
  }
}

TEST(Parse, Ipv4FragmentsGoToTheKernel) {
  auto base = build_frame(FrameSpec{});
  std::size_t l3 = base.l3_offset;
  for (std::uint16_t flags_offset : {0x2000, 0x0001, 0x2010, 0x1fff}) {  // MF; offsets
    auto f = base.bytes;
    test::put16(f, l3 + 6, flags_offset);
    EXPECT_EQ(parse(f), ParseError::ipv4_fragment) << std::hex << flags_offset;
  }
  auto f = base.bytes;
  test::put16(f, l3 + 6, 0x4000);  // DF alone is a whole packet
  EXPECT_EQ(parse(f), ParseError::none);
  EXPECT_TRUE(passes_to_kernel(ParseError::ipv4_fragment));
}

TEST(Parse, Ipv6ExtensionHeadersAndOtherProtocolsGoToTheKernel) {
  FrameSpec s;
  s.version = IpVersion::v6;
  s.src = addr("2001:db8::1");
  s.dst = addr("2001:db8::2");
  auto base = build_frame(s);
  std::size_t l3 = base.l3_offset;
  for (std::uint8_t next : {0, 43, 44, 50, 51, 59, 60, 135, 139, 140, 253, 254}) {
    auto f = base.bytes;
    f[l3 + 6] = next;
    EXPECT_EQ(parse(f), ParseError::ipv6_extension_header) << int{next};
  }
  auto f = base.bytes;
  f[l3 + 6] = 58;  // ICMPv6: neighbour discovery must reach the kernel
  EXPECT_EQ(parse(f), ParseError::unsupported_protocol);
  auto v4 = build_frame(FrameSpec{});
  v4.bytes[v4.l3_offset + 9] = 1;  // ICMP
  EXPECT_EQ(parse(v4.bytes), ParseError::unsupported_protocol);
  EXPECT_TRUE(passes_to_kernel(ParseError::ipv6_extension_header));
  EXPECT_TRUE(passes_to_kernel(ParseError::unsupported_protocol));
}

TEST(Parse, Ipv6LengthErrors) {
  FrameSpec s;
  s.version = IpVersion::v6;
  s.src = addr("2001:db8::1");
  s.dst = addr("2001:db8::2");
  auto base = build_frame(s);
  std::size_t l3 = base.l3_offset;
  auto f = base.bytes;
  test::put16(f, l3 + 4, static_cast<std::uint16_t>(f.size() - l3 - 40 + 1));
  EXPECT_EQ(parse(f), ParseError::bad_ipv6_length);
  f = base.bytes;
  test::put16(f, l3 + 4, 4);
  EXPECT_EQ(parse(f), ParseError::truncated_udp);
  f = base.bytes;
  f[l3] = 0x40;
  EXPECT_EQ(parse(f), ParseError::bad_ip_version);
}

TEST(Parse, UdpLengthField) {
  auto base = build_frame(FrameSpec{});  // 4 bytes of payload: UDP length 12
  std::size_t l4 = base.l4_offset;
  ParsedPacket p;
  auto f = base.bytes;
  test::put16(f, l4 + 4, 7);
  EXPECT_EQ(parse(f), ParseError::bad_udp_length);
  test::put16(f, l4 + 4, 13);
  EXPECT_EQ(parse(f), ParseError::bad_udp_length);
  test::put16(f, l4 + 4, 0);  // jumbogram marker: no jumbograms here
  EXPECT_EQ(parse(f), ParseError::bad_udp_length);
  test::put16(f, l4 + 4, 10);  // shorter than the IP payload: the rest is padding
  ASSERT_EQ(parse(f, p), ParseError::none);
  EXPECT_EQ(p.payload_bytes, 2u);
  test::put16(f, l4 + 4, 8);
  ASSERT_EQ(parse(f, p), ParseError::none);
  EXPECT_EQ(p.payload_bytes, 0u);
}

TEST(Parse, TcpDataOffset) {
  FrameSpec s;
  s.protocol = IPPROTO_TCP;
  auto base = build_frame(s);  // 20-byte header + 4 bytes payload
  std::size_t l4 = base.l4_offset;
  auto f = base.bytes;
  f[l4 + 12] = 0x40;  // 16 bytes
  EXPECT_EQ(parse(f), ParseError::bad_tcp_offset);
  f[l4 + 12] = 0x70;  // 28 bytes > 24 available
  EXPECT_EQ(parse(f), ParseError::bad_tcp_offset);
  f[l4 + 12] = 0x60;  // 24 bytes: exactly the segment, no payload
  ParsedPacket p;
  ASSERT_EQ(parse(f, p), ParseError::none);
  EXPECT_EQ(p.payload_bytes, 0u);
  f = base.bytes;
  test::put16(f, base.l3_offset + 2, 20 + 19);  // IP says 19 bytes of TCP
  EXPECT_EQ(parse(f), ParseError::truncated_tcp);
}

TEST(Parse, NonIpEthertypesGoToTheKernel) {
  auto f = build_frame(FrameSpec{}).bytes;
  f[12] = 0x08;
  f[13] = 0x06;  // ARP
  EXPECT_EQ(parse(f), ParseError::unsupported_ethertype);
  f[12] = 0x00;
  f[13] = 0x40;  // an 802.3 length, not an ethertype
  EXPECT_EQ(parse(f), ParseError::unsupported_ethertype);
  EXPECT_TRUE(passes_to_kernel(ParseError::unsupported_ethertype));
}

TEST(Parse, ErrorNamesAreDistinctSnakeCase) {
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < kParseErrorCount; ++i) {
    std::string_view n = to_string(static_cast<ParseError>(i));
    EXPECT_TRUE(names.insert(n).second) << n;
    EXPECT_EQ(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_"), std::string_view::npos);
  }
  EXPECT_EQ(to_string(ParseError::truncated_ethernet), "truncated_ethernet");
  EXPECT_EQ(to_string(ParseError::bad_tcp_offset), "bad_tcp_offset");
  EXPECT_EQ(to_string(ParseError::ipv6_extension_header), "ipv6_extension_header");
  EXPECT_FALSE(passes_to_kernel(ParseError::none));
  EXPECT_FALSE(passes_to_kernel(ParseError::bad_udp_length));
}

}  // namespace
}  // namespace ferry::packet
