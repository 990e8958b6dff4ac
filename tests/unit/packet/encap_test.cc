// encapsulate() and ipip_source_in_prefix(): each outer header against bytes written out by hand
// (checksums from an independent one's-complement sum in Python, re-checked here with
// frame_builder.hh's naive one), the inner packet neither moved nor changed, and every refusal
// leaving the room exactly as it was.
#include "lib/packet/encap.hh"

#include <gtest/gtest.h>

#include "lib/packet/rewrite.hh"
#include "tests/unit/packet/ip_hop_builder.hh"
#include "tests/unit/packet/vectors.hh"

namespace ferry::packet {
namespace {

using test::addr;
using test::Bytes;
using test::reference_sum;
using test::slice;

constexpr std::uint32_t kHeadroom = 256;
constexpr std::uint8_t kUnused = 0xee;  // what fills the room around the frame
constexpr std::uint32_t kFlowHash = 0x12345678;

net::IpAddress ip(const std::string& text) {
  return *net::IpAddress::parse(text);
}

EncapHeader header(EncapKind kind, bool outer_v6) {
  EncapHeader h;
  h.kind = kind;
  h.source = ip(outer_v6 ? "2001:db8::a" : "10.0.0.1");
  h.destination = ip(outer_v6 ? "2001:db8:1::7" : "10.0.1.7");
  h.gue_port = 6080;
  h.ip_id = 0x0101;
  h.flow_hash = kFlowHash;
  return h;
}

// kUdp4 with another TOS byte and DF, its header checksum made right again.
Bytes udp4_with(std::uint8_t tos, bool dont_fragment) {
  Bytes f = test::kUdp4;
  f[15] = tos;
  f[20] = dont_fragment ? 0x40 : 0x00;
  test::fix_ipv4_checksum(f, 14);
  return f;
}

// kUdp6 with another traffic class (its flow label is 0 and stays 0).
Bytes udp6_with(std::uint8_t traffic_class) {
  Bytes f = test::kUdp6;
  f[14] = static_cast<std::uint8_t>(0x60 | traffic_class >> 4);
  f[15] = static_cast<std::uint8_t>((traffic_class & 0x0f) << 4 | (f[15] & 0x0f));
  return f;
}

struct EncapRun {
  Bytes room;  // kHeadroom bytes, the frame, `tail` more; kUnused around the frame
  std::size_t tail = 0;
  ParsedPacket p;
  Encapsulated result;
};

EncapRun encap(const Bytes& frame, const EncapHeader& h, std::uint32_t headroom = kHeadroom,
               std::size_t tail = 64) {
  EncapRun r;
  r.tail = tail;
  r.room.assign(headroom, kUnused);
  r.room.insert(r.room.end(), frame.begin(), frame.end());
  r.room.resize(r.room.size() + tail, kUnused);
  EXPECT_EQ(parse_frame(frame, r.p), ParseError::none);
  r.result = encapsulate(r.room, headroom, r.p, h);
  return r;
}

// The run made `head` (L2 header + outer headers, written out by hand) followed by the original's
// inner packet, which is still where it was; nothing around the new frame was written; the outer
// IPv4 header sums to 0xffff; and p describes the outer packet as parse_frame() sees it.
void expect_frame(const EncapRun& r, const Bytes& original, const Bytes& head) {
  ASSERT_TRUE(r.result.ok()) << to_string(r.result.error);
  ParsedPacket inner;
  ASSERT_EQ(parse_frame(original, inner), ParseError::none);
  std::uint32_t overhead = static_cast<std::uint32_t>(head.size()) - inner.l3_offset;
  Bytes inner_packet = slice(original, inner.l3_offset, inner.l3_bytes);
  EXPECT_EQ(r.result.frame_offset, kHeadroom - overhead);
  EXPECT_EQ(r.result.frame_bytes, head.size() + inner.l3_bytes);
  Bytes expected = head;
  expected.insert(expected.end(), inner_packet.begin(), inner_packet.end());
  EXPECT_EQ(slice(r.room, r.result.frame_offset, r.result.frame_bytes), expected);
  EXPECT_EQ(slice(r.room, kHeadroom + inner.l3_offset, inner.l3_bytes), inner_packet);
  EXPECT_EQ(slice(r.room, 0, r.result.frame_offset), Bytes(r.result.frame_offset, kUnused));
  // After it: the old frame's Ethernet padding, if any, then the room as it was.
  std::size_t end = r.result.frame_offset + r.result.frame_bytes;
  std::size_t inner_end = inner.l3_offset + inner.l3_bytes;
  Bytes after = slice(original, inner_end, original.size() - inner_end);
  after.resize(after.size() + r.tail, kUnused);
  EXPECT_EQ(slice(r.room, end, r.room.size() - end), after);

  Bytes frame = slice(r.room, r.result.frame_offset, r.result.frame_bytes);
  std::uint32_t l3 = inner.l3_offset;
  if (frame[l3] == 0x45) {
    EXPECT_EQ(reference_sum(slice(frame, l3, 20)), 0xffff);
  }
  ParsedPacket outer;
  ParseError e = parse_frame(frame, outer);
  ASSERT_TRUE(e == ParseError::none || e == ParseError::unsupported_protocol) << to_string(e);
  EXPECT_EQ(r.p.version, outer.version);
  EXPECT_EQ(r.p.ethertype, outer.ethertype);
  EXPECT_EQ(r.p.src_address, outer.src_address);
  EXPECT_EQ(r.p.dst_address, outer.dst_address);
  EXPECT_EQ(r.p.protocol, outer.protocol);
  EXPECT_EQ(r.p.hop_limit, kEncapTtl);
  EXPECT_EQ(r.p.vlan_count, inner.vlan_count);
  EXPECT_EQ(r.p.l3_offset, outer.l3_offset);
  EXPECT_EQ(r.p.l3_bytes, outer.l3_bytes);
  EXPECT_EQ(r.p.l4_offset, outer.l4_offset);
  EXPECT_EQ(r.p.l4_bytes, outer.l4_bytes);
  EXPECT_EQ(r.p.l3_bytes, inner.l3_bytes + overhead);
  EXPECT_EQ(r.p.frame_bytes, r.result.frame_bytes);
  if (e == ParseError::none) {  // GUE: the UDP fields as parsed
    EXPECT_EQ(r.p.src_port, outer.src_port);
    EXPECT_EQ(r.p.dst_port, outer.dst_port);
    EXPECT_EQ(r.p.payload_offset, outer.payload_offset);
    EXPECT_EQ(r.p.payload_bytes, inner.l3_bytes);
  } else {  // IPIP: the payload is what follows the inner IP header
    EXPECT_EQ(r.p.payload_offset, r.p.l4_offset + (inner.l4_offset - inner.l3_offset));
  }
  // route() takes it as it is.
  EXPECT_TRUE(frame_matches(frame, r.p));
}

// ---- IPIP ----

TEST(EncapIpip, Ipv4InIpv4CopiesDscpEcnAndDf) {
  Bytes inner = udp4_with(0xb9, true);  // DSCP EF, ECT(1)
  EncapRun r = encap(inner, header(EncapKind::ipip, false));
  expect_frame(r, inner, {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00,
                          0x00, 0x00, 0x00, 0x01, 0x08, 0x00,              // Ethernet
                          0x45, 0xb9, 0x00, 0x3b, 0x01, 0x01, 0x40, 0x00,  // TOS, length 59, id, DF
                          0x40, 0x04, 0x23, 0xfe,                          // TTL 64, IPIP, checksum
                          0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x07});
}

TEST(EncapIpip, Ipv4InIpv4SendsCeAsEct0) {
  Bytes inner = udp4_with(0xbb, true);  // DSCP EF, CE
  EncapRun r = encap(inner, header(EncapKind::ipip, false));
  expect_frame(r, inner, {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
                          0x08, 0x00, 0x45, 0xba, 0x00, 0x3b, 0x01, 0x01, 0x40, 0x00, 0x40, 0x04,
                          0x23, 0xfd, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x07});
}

TEST(EncapIpip, Ipv4InIpv4LeavesDfClearWhenTheInnerHasIt) {
  EncapRun r = encap(test::kUdp4, header(EncapKind::ipip, false));
  expect_frame(r, test::kUdp4,
               {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
                0x08, 0x00, 0x45, 0x00, 0x00, 0x3b, 0x01, 0x01, 0x00, 0x00, 0x40, 0x04,
                0x64, 0xb7, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x07});
}

TEST(EncapIpip, Ipv6InIpv6CarriesFlowLabelAndTrafficClass) {
  Bytes inner = udp6_with(0xb9);
  EncapRun r = encap(inner, header(EncapKind::ipip, true));
  expect_frame(r, inner, {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00,
                          0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,  // Ethernet
                          0x6b, 0x94, 0x56, 0x78,              // TC 0xb9, label 0x45678
                          0x00, 0x3c, 0x29, 0x40,              // length 60, IPv6, hop 64
                          0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00,  // 2001:db8::a
                          0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a,  //
                          0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,  // 2001:db8:1::7
                          0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07});
}

TEST(EncapIpip, Ipv6InIpv6SendsCeAsEct0) {
  Bytes inner = udp6_with(0x03);
  EncapRun r = encap(inner, header(EncapKind::ipip, true));
  expect_frame(r, inner,
               {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,
                0x60, 0x24, 0x56, 0x78, 0x00, 0x3c, 0x29, 0x40, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00,
                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0a, 0x20, 0x01, 0x0d, 0xb8,
                0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07});
}

TEST(EncapIpip, Ipv4InIpv6) {
  Bytes inner = udp4_with(0xb9, true);
  EncapRun r = encap(inner, header(EncapKind::ipip, true));
  expect_frame(r, inner,
               {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01,
                0x86, 0xdd, 0x6b, 0x94, 0x56, 0x78, 0x00, 0x27, 0x04, 0x40,  // length 39, IPIP
                0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                0x00, 0x00, 0x00, 0x0a, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01, 0x00, 0x00,
                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07});
}

TEST(EncapIpip, Ipv6InIpv4SetsDf) {
  Bytes inner = udp6_with(0xb9);
  EncapRun r = encap(inner, header(EncapKind::ipip, false));
  expect_frame(r, inner,
               {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00,
                0x01, 0x08, 0x00, 0x45, 0xb9, 0x00, 0x50, 0x01, 0x01, 0x40, 0x00,  // length 80, DF
                0x40, 0x29, 0x23, 0xc4,                                            // protocol 41
                0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x07});
}

TEST(EncapIpip, KeepsVlanTagsAndDropsEthernetPadding) {
  test::FrameSpec spec;
  spec.vlan_tpids = {kEthertypeQinQ, kEthertypeVlan};
  spec.vlan_ids = {100, 200};
  spec.version = IpVersion::v6;
  spec.src = addr("2001:db8::1");
  spec.dst = addr("2001:db8:ffff::10");
  spec.pad_to_bytes = 128;
  Bytes inner = test::build_frame(spec).bytes;
  EncapRun r = encap(inner, header(EncapKind::ipip, false));
  std::uint32_t inner_ip_bytes = 40 + 8 + 4;
  ASSERT_TRUE(r.result.ok());
  Bytes head = slice(inner, 0, 22);  // the MACs and both tags, then the outer ethertype
  head[20] = 0x08;
  head[21] = 0x00;
  Bytes outer_ip = {0x45, 0x00, 0x00, static_cast<std::uint8_t>(20 + inner_ip_bytes),
                    0x01, 0x01, 0x40, 0x00,
                    0x40, 0x29, 0x00, 0x00,
                    0x0a, 0x00, 0x00, 0x01,
                    0x0a, 0x00, 0x01, 0x07};
  test::put16(outer_ip, 10, static_cast<std::uint16_t>(~reference_sum(outer_ip)));
  head.insert(head.end(), outer_ip.begin(), outer_ip.end());
  expect_frame(r, inner, head);
  EXPECT_EQ(r.p.vlan_ids[0], 100);
  EXPECT_EQ(r.p.vlan_ids[1], 200);
}

TEST(EncapIpip, AnIpv4FragmentWithOptionsGoesWhole) {
  test::FrameSpec spec;
  spec.ipv4_option_bytes = 8;
  spec.payload.assign(64, 0x5a);
  Bytes inner = test::ipv4_fragment(test::build_frame(spec), 0, 32, true);  // MF, DF clear
  ParsedPacket p;
  ASSERT_EQ(parse_frame(inner, p), ParseError::ipv4_fragment);  // its L3 fields filled
  Bytes room(kHeadroom, kUnused);
  room.insert(room.end(), inner.begin(), inner.end());
  Encapsulated result = encapsulate(room, kHeadroom, p, header(EncapKind::ipip, false));
  ASSERT_TRUE(result.ok()) << to_string(result.error);
  Bytes frame = slice(room, result.frame_offset, result.frame_bytes);
  EXPECT_EQ(frame.size(), inner.size() + 20);
  EXPECT_EQ(test::stored16(frame, 14 + 2), 20 + 28 + 32);  // outer total length
  EXPECT_EQ(test::stored16(frame, 14 + 6), 0);             // no DF: the inner had none
  EXPECT_EQ(reference_sum(slice(frame, 14, 20)), 0xffff);
  EXPECT_EQ(slice(frame, 34, inner.size() - 14), slice(inner, 14, inner.size() - 14));
  EXPECT_EQ(p.l4_offset, 14u + 20);
  EXPECT_EQ(p.payload_offset, 14u + 20 + 28);  // after the inner header and its options
  EXPECT_EQ(p.payload_bytes, 32u);
}

// ---- GUE ----

TEST(EncapGue, OverIpv4SendsNoChecksumAndAPortFromTheHash) {
  EncapRun r = encap(test::kUdp4, header(EncapKind::gue, false));
  expect_frame(r, test::kUdp4,
               {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00,
                0x00, 0x00, 0x00, 0x01, 0x08, 0x00,                // Ethernet
                0x45, 0x00, 0x00, 0x43, 0x01, 0x01, 0x00, 0x00,    // length 67
                0x40, 0x11, 0x64, 0xa2,                            // UDP
                0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x01, 0x07,    //
                0xd6, 0x78, 0x17, 0xc0, 0x00, 0x2f, 0x00, 0x00});  // 0xc000|0x1678, 6080, 47, 0
}

TEST(EncapGue, OverIpv6SendsTheFullChecksum) {
  EncapRun r = encap(test::kUdp6, header(EncapKind::gue, true));
  expect_frame(r, test::kUdp6,
               {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00,
                0x01, 0x86, 0xdd, 0x60, 0x04, 0x56, 0x78, 0x00, 0x44, 0x11, 0x40,  // length 68, UDP
                0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                0x00, 0x00, 0x00, 0x00, 0x0a, 0x20, 0x01, 0x0d, 0xb8, 0x00, 0x01,
                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07,  //
                0xd6, 0x78, 0x17, 0xc0, 0x00, 0x44, 0x44, 0x7a});
  // Re-checked here: pseudo-header + UDP header + the inner packet sum to 0xffff.
  FrameBytes span = r.result.frame(r.room);
  Bytes frame(span.begin(), span.end());
  Bytes summed = slice(frame, 22, 32);  // the addresses
  summed.insert(summed.end(), {0, 0, 0, 68, 0, 0, 0, IPPROTO_UDP});
  Bytes l4 = slice(frame, 54, 68);
  summed.insert(summed.end(), l4.begin(), l4.end());
  EXPECT_EQ(reference_sum(summed), 0xffff);
}

TEST(EncapGue, OverIpv6SendsAComputedZeroAsFfff) {
  EncapHeader h = header(EncapKind::gue, true);
  h.gue_port = 0x5c3a;  // makes the sum come out as 0xffff: a checksum of 0
  EncapRun r = encap(test::kUdp6, h);
  ASSERT_TRUE(r.result.ok());
  std::size_t udp = r.result.frame_offset + 14 + 40;
  EXPECT_EQ(test::stored16(r.room, udp + 2), 0x5c3a);
  EXPECT_EQ(test::stored16(r.room, udp + 6), 0xffff);
}

TEST(EncapGue, SourcePortStaysInTheEphemeralRange) {
  for (auto [hash, port] : {std::pair<std::uint32_t, std::uint16_t>{0, 0xc000},
                            {0xffffffff, 0xffff},
                            {0x4000, 0xc000},
                            {0x3fff, 0xffff},
                            {0xabcd1234, 0xd234}}) {
    EncapHeader h = header(EncapKind::gue, false);
    h.flow_hash = hash;
    EncapRun r = encap(test::kUdp4, h);
    ASSERT_TRUE(r.result.ok());
    EXPECT_EQ(test::stored16(r.room, r.result.frame_offset + 14 + 20), port) << hash;
    EXPECT_EQ(r.p.src_port, port);
  }
}

// ---- refusals ----

// A refused encapsulation writes nothing and leaves p as it was.
void expect_refused(const Bytes& frame, ParsedPacket p, const EncapHeader& h, EncapError why,
                    std::uint32_t headroom = kHeadroom, std::size_t tail = 0) {
  Bytes room(headroom, kUnused);
  room.insert(room.end(), frame.begin(), frame.end());
  room.resize(room.size() + tail, kUnused);
  Bytes before = room;
  ParsedPacket kept = p;
  Encapsulated result = encapsulate(room, headroom, p, h);
  EXPECT_EQ(result.error, why) << to_string(result.error);
  EXPECT_EQ(result.frame_bytes, 0u);
  EXPECT_EQ(room, before);
  EXPECT_EQ(p.version, kept.version);
  EXPECT_EQ(p.protocol, kept.protocol);
  EXPECT_EQ(p.dst_address, kept.dst_address);
  EXPECT_EQ(p.l3_bytes, kept.l3_bytes);
  EXPECT_EQ(p.l4_offset, kept.l4_offset);
  EXPECT_EQ(p.frame_bytes, kept.frame_bytes);
}

ParsedPacket parsed(const Bytes& frame) {
  ParsedPacket p;
  EXPECT_EQ(parse_frame(frame, p), ParseError::none);
  return p;
}

TEST(EncapRefusal, TooLittleHeadroom) {
  for (bool v6 : {false, true}) {
    for (EncapKind kind : {EncapKind::ipip, EncapKind::gue}) {
      std::uint32_t overhead = encap_overhead(kind, v6);
      expect_refused(test::kUdp4, parsed(test::kUdp4), header(kind, v6), EncapError::no_headroom,
                     overhead - 1);
      EncapRun r = encap(test::kUdp4, header(kind, v6), overhead, 0);  // exactly enough
      EXPECT_TRUE(r.result.ok());
      EXPECT_EQ(r.result.frame_offset, 0u);
    }
  }
}

TEST(EncapRefusal, InnerPacketNotWholeInTheRoom) {
  ParsedPacket p = parsed(test::kUdp4);
  Bytes cut = slice(test::kUdp4, 0, test::kUdp4.size() - 1);
  expect_refused(cut, p, header(EncapKind::ipip, false), EncapError::not_whole_packet);
  Bytes room(kHeadroom, kUnused);  // a frame offset past the room
  Encapsulated result = encapsulate(room, kHeadroom + 1, p, header(EncapKind::ipip, false));
  EXPECT_EQ(result.error, EncapError::not_whole_packet);
}

TEST(EncapRefusal, LengthsThatDisagree) {
  EncapHeader h = header(EncapKind::ipip, false);
  ParsedPacket p = parsed(test::kUdp4);
  p.l3_bytes -= 1;  // shorter than the total length says
  expect_refused(test::kUdp4, p, h, EncapError::not_whole_packet);
  p = parsed(test::kUdp4);
  p.l3_bytes += 1;  // longer, with room behind it
  expect_refused(test::kUdp4, p, h, EncapError::not_whole_packet, kHeadroom, 16);
  Bytes bad_ihl = test::kUdp4;
  bad_ihl[14] = 0x44;
  expect_refused(bad_ihl, parsed(test::kUdp4), h, EncapError::not_whole_packet);
  ParsedPacket p6 = parsed(test::kUdp6);
  p6.l3_bytes -= 2;
  expect_refused(test::kUdp6, p6, h, EncapError::not_whole_packet);
  p = parsed(test::kUdp4);
  p.l3_offset = 13;  // not an L2 header parse_frame() makes
  expect_refused(test::kUdp4, p, h, EncapError::not_whole_packet);
  p.l3_offset = 16;
  expect_refused(test::kUdp4, p, h, EncapError::not_whole_packet);
}

TEST(EncapRefusal, VersionMismatch) {
  EncapHeader h = header(EncapKind::gue, true);
  ParsedPacket p = parsed(test::kUdp6);
  p.version = IpVersion::v4;  // the ethertype says IPv6
  expect_refused(test::kUdp6, p, h, EncapError::version_mismatch);
  Bytes nibble = test::kUdp4;
  nibble[14] = 0x65;  // ethertype IPv4, version 6
  expect_refused(nibble, parsed(test::kUdp4), h, EncapError::version_mismatch);
}

TEST(EncapRefusal, AnOuterHeaderThatCannotBeBuilt) {
  EncapHeader mixed = header(EncapKind::ipip, false);
  mixed.source = ip("2001:db8::a");
  expect_refused(test::kUdp4, parsed(test::kUdp4), mixed, EncapError::bad_outer);
  EncapHeader no_port = header(EncapKind::gue, false);
  no_port.gue_port = 0;
  expect_refused(test::kUdp4, parsed(test::kUdp4), no_port, EncapError::bad_outer);
  EncapHeader unknown = header(static_cast<EncapKind>(7), false);
  expect_refused(test::kUdp4, parsed(test::kUdp4), unknown, EncapError::bad_outer);
}

TEST(EncapRefusal, OuterLengthPast65535) {
  test::FrameSpec spec;
  spec.payload.assign(65535 - 28, 0x5a);  // an inner IPv4 packet of 65,535 bytes
  Bytes inner = test::build_frame(spec).bytes;
  expect_refused(inner, parsed(inner), header(EncapKind::ipip, false), EncapError::too_long);
  // Over IPv6 the outer header is not in the payload length: 65,535 + 8 is too long for GUE,
  // 65,535 fits for IPIP.
  expect_refused(inner, parsed(inner), header(EncapKind::gue, true), EncapError::too_long);
  EncapRun r = encap(inner, header(EncapKind::ipip, true));
  EXPECT_TRUE(r.result.ok());
  EXPECT_EQ(r.p.l3_bytes, 40u + 65535u);
}

TEST(EncapOverhead, PerKindAndFamily) {
  EXPECT_EQ(encap_overhead(EncapKind::ipip, false), 20u);
  EXPECT_EQ(encap_overhead(EncapKind::ipip, true), 40u);
  EXPECT_EQ(encap_overhead(EncapKind::gue, false), 28u);
  EXPECT_EQ(encap_overhead(EncapKind::gue, true), 48u);
  EXPECT_EQ(encapsulated_ip_bytes(1480, EncapKind::ipip, false), 1500u);
  EXPECT_EQ(encapsulated_ip_bytes(1452, EncapKind::gue, true), 1500u);
  EXPECT_EQ(to_string(EncapError::no_headroom), "no_headroom");
  EXPECT_EQ(to_string(EncapError::too_long), "too_long");
}

// ---- the outer IPv4 source ----

net::IpAddress source_for(const std::string& prefix, const std::string& source,
                          std::uint32_t hash) {
  return ipip_source_in_prefix(*net::Prefix::parse(prefix), ip(source), hash);
}

TEST(IpipSourceInPrefix, Slash32IsTheConfiguredSource) {
  EXPECT_EQ(source_for("10.0.0.1/32", "10.0.0.1", 0x12345678), ip("10.0.0.1"));
  EXPECT_EQ(source_for("10.0.0.1/32", "10.0.0.1", 0), ip("10.0.0.1"));
}

TEST(IpipSourceInPrefix, Slash31UsesBothAddresses) {
  EXPECT_EQ(source_for("10.0.0.0/31", "10.0.0.0", 0), ip("10.0.0.0"));
  EXPECT_EQ(source_for("10.0.0.0/31", "10.0.0.0", 1), ip("10.0.0.1"));
  EXPECT_EQ(source_for("10.0.0.0/31", "10.0.0.0", 0xfffffffe), ip("10.0.0.0"));
  EXPECT_EQ(source_for("10.0.0.0/31", "10.0.0.0", 0xffffffff), ip("10.0.0.1"));
}

TEST(IpipSourceInPrefix, Slash30NeverTheSubnetOrBroadcast) {
  EXPECT_EQ(source_for("10.0.0.4/30", "10.0.0.5", 0x10), ip("10.0.0.5"));  // host 0
  EXPECT_EQ(source_for("10.0.0.4/30", "10.0.0.5", 0x11), ip("10.0.0.5"));
  EXPECT_EQ(source_for("10.0.0.4/30", "10.0.0.5", 0x12), ip("10.0.0.6"));
  EXPECT_EQ(source_for("10.0.0.4/30", "10.0.0.5", 0x13), ip("10.0.0.5"));  // host 3
}

TEST(IpipSourceInPrefix, Slash24TakesTheLowByte) {
  EXPECT_EQ(source_for("10.1.2.0/24", "10.1.2.1", 0x12345678), ip("10.1.2.120"));
  EXPECT_EQ(source_for("10.1.2.0/24", "10.1.2.1", 0xabcdef01), ip("10.1.2.1"));
  EXPECT_EQ(source_for("10.1.2.0/24", "10.1.2.1", 0xabcdeffe), ip("10.1.2.254"));
  EXPECT_EQ(source_for("10.1.2.0/24", "10.1.2.1", 0x12345600), ip("10.1.2.1"));  // all zeros
  EXPECT_EQ(source_for("10.1.2.0/24", "10.1.2.1", 0x123456ff), ip("10.1.2.1"));  // all ones
}

TEST(IpipSourceInPrefix, NotAnIpv4PrefixIsTheConfiguredSource) {
  EXPECT_EQ(source_for("2001:db8::/64", "10.0.0.1", 0x12345678), ip("10.0.0.1"));
}

}  // namespace
}  // namespace ferry::packet
