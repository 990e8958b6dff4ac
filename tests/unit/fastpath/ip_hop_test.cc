// process_frame() as an IP hop, against hand-built frames and a Snapshot with the ports' MTUs and
// addresses: fragments of balanced datagrams follow their first, ICMP errors about balanced
// datagrams are translated both ways (every checksum recomputed from scratch), and the gateway
// answers expiring and oversized datagrams itself.
#include "lib/fastpath/ip_hop.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "lib/fastpath/frame_processor.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/icmp.hh"
#include "lib/packet/parse.hh"
#include "tests/unit/fastpath/ip_hop_state.hh"
#include "tests/unit/fastpath/lab_tables.hh"
#include "tests/unit/packet/ip_hop_builder.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using namespace packet::test;

constexpr std::size_t kL3 = 14;  // no VLAN tags in these frames

BuiltFrame big_request(std::uint16_t client_port, std::size_t payload_bytes) {
  return build_frame(large_request(client_port, payload_bytes));
}

// The same IPv4 frame with identification `id` (header checksum made right).
Bytes with_id(Bytes f, std::uint16_t id) {
  put16(f, kL3 + 4, id);
  fix_ipv4_checksum(f, kL3);
  return f;
}

void set_dont_fragment(Bytes& f) {
  f[kL3 + 6] |= 0x40;
  fix_ipv4_checksum(f, kL3);
}

// The 4 bytes of an IPv4 address, as they stand in a header.
Bytes v4(const std::string& text) {
  auto a = addr(text);
  return Bytes(a.begin(), a.begin() + 4);
}

// The 16 bytes of an IPv6 address.
Bytes v6(const std::string& text) {
  auto a = addr(text);
  return Bytes(a.begin(), a.end());
}

net::IpAddress ipv4_at(const Bytes& f, std::size_t at) {
  std::array<std::uint8_t, 16> bytes{};
  std::copy_n(f.begin() + static_cast<std::ptrdiff_t>(at), 4, bytes.begin());
  return {AF_INET, bytes};
}
net::IpAddress destination_of(const Bytes& f) {
  return ipv4_at(f, kL3 + 16);
}

void expect_ipv4_header_checksum(const Bytes& f, std::size_t l3) {
  EXPECT_EQ(stored16(f, l3 + 10), reference_ipv4_checksum(f, l3, (f[l3] & 0x0f) * 4u))
      << "IPv4 header checksum at " << l3;
}

// The IPv4 datagram the fragments (L2 + 20-byte header each) make, as one frame.
Bytes reassembled(const std::vector<Bytes>& fragments) {
  Bytes whole = slice(fragments.front(), 0, kL3 + 20);
  std::size_t data_bytes = 0;
  for (const Bytes& f : fragments) {
    std::size_t offset = (stored16(f, kL3 + 6) & 0x1fff) * 8u;
    std::size_t data = stored16(f, kL3 + 2) - 20u;
    data_bytes = std::max(data_bytes, offset + data);
    whole.resize(kL3 + 20 + data_bytes);
    std::copy_n(f.begin() + kL3 + 20, data, whole.begin() + kL3 + 20 + offset);
  }
  put16(whole, kL3 + 2, static_cast<std::uint16_t>(20 + data_bytes));
  put16(whole, kL3 + 6, 0);
  fix_ipv4_checksum(whole, kL3);
  return whole;
}

// The lab's gateway with its ports' facts: MTUs and the gateway's addresses 10.1.0.1 / 10.2.0.1.
std::unique_ptr<Snapshot> ip_hop_snapshot(const config::Config& c = lab_config(),
                                          std::uint32_t mtu0 = 1500, std::uint32_t mtu1 = 1500) {
  auto s = snapshot(config_tables(c), next_hop_tables());
  s->ports = port_facts(mtu0, mtu1);
  return s;
}

// The lab with an IPv6 service as well: 2001:db8::10 port 53, backends 2001:db8:2::2 and ::3.
config::Config dual_stack_config() {
  config::Config c = lab_config();
  config::ServiceConfig dns6;
  dns6.name = "dns6";
  dns6.vip = ip("2001:db8::10");
  dns6.port = 53;
  dns6.backends = {endpoint("[2001:db8:2::2]:53"), endpoint("[2001:db8:2::3]:53")};
  c.services.push_back(dns6);
  return c;
}

BuiltFrame big_request6(std::uint16_t client_port, std::size_t payload_bytes) {
  return build_frame(large_request(client_port, payload_bytes, packet::IpVersion::v6));
}

// The IPv6 datagram that fragments (fixed header, Fragment header, data) make, as one frame.
Bytes reassembled6(const std::vector<Bytes>& fragments) {
  constexpr std::size_t kData = kL3 + 48;
  Bytes whole = slice(fragments.front(), 0, kL3 + 40);
  whole[kL3 + 6] = fragments.front()[kL3 + 40];  // the Fragment header's next header
  std::size_t data_bytes = 0;
  for (const Bytes& f : fragments) {
    std::size_t offset = stored16(f, kL3 + 42) & 0xfff8u;
    std::size_t data = f.size() - kData;
    data_bytes = std::max(data_bytes, offset + data);
    whole.resize(kL3 + 40 + data_bytes);
    std::copy_n(f.begin() + kData, data, whole.begin() + kL3 + 40 + offset);
  }
  put16(whole, kL3 + 4, static_cast<std::uint16_t>(data_bytes));
  return whole;
}

class IpHopTest : public ::testing::Test {
 protected:
  // Bytes after the frame it may grow into (the rest of its UMEM frame).
  static constexpr std::uint32_t kRoom = 2048;

  // process_frame() with the IP-hop state; `frame` ends as long as the outcome says.
  FrameOutcome run(Bytes& frame, std::uint32_t ingress = 0, FlowAffinity flows = {}) {
    std::size_t n = frame.size();
    frame.resize(n + kRoom);
    FrameOutcome o = process_frame({frame.data(), n}, *snapshot_, ingress, {queue_, counters_},
                                   flows, hop_.at(now_ms_, kRoom));
    frame.resize(o.length != 0 ? o.length : n);
    return o;
  }
  std::uint64_t drops(Drop d) const { return counters_.drops[static_cast<std::size_t>(d)].value(); }
  // Where Maglev sends a request of client port `port`.
  net::IpAddress maglev_backend(std::uint16_t port) {
    auto frame = build_frame(request(port)).bytes;
    EXPECT_EQ(run(frame), FrameOutcome::to(1));
    return destination_of(frame);
  }
  // Every checksum of an ICMPv4 error in `f`, recomputed: outer header, ICMP message, quoted
  // header, and (when the quote holds the whole datagram) the quoted UDP checksum.
  void expect_icmp_checksums(const Bytes& f, bool whole_quote) {
    expect_ipv4_header_checksum(f, kL3);
    std::size_t icmp = kL3 + 20;
    EXPECT_EQ(reference_icmp_sum(f, kL3, icmp, f.size() - icmp, true), 0xffff) << "ICMP checksum";
    expect_ipv4_header_checksum(f, icmp + 8);
    if (!whole_quote) return;
    Bytes quoted = quoted_as_frame(f, kL3, icmp + 8);
    packet::ParsedPacket q;
    ASSERT_EQ(packet::parse_frame({quoted.data(), quoted.size()}, q), packet::ParseError::none);
    EXPECT_EQ(stored16(quoted, q.l4_checksum_offset()), reference_checksums(quoted, q).l4)
        << "quoted UDP checksum";
  }

  std::unique_ptr<Snapshot> snapshot_ = ip_hop_snapshot();
  IpHopState hop_;
  std::uint64_t now_ms_ = 5000;
  ResolutionQueue queue_;
  WorkerCounters counters_;
};

TEST_F(IpHopTest, AFirstFragmentDecidesTheBackendAndItsLaterFragmentsFollow) {
  BuiltFrame whole = big_request(40000, 3000);  // 3,008 bytes of UDP
  std::vector<Bytes> pieces = {ipv4_fragment(whole, 0, 1480, true),
                               ipv4_fragment(whole, 1480, 1480, true),
                               ipv4_fragment(whole, 2960, 48, false)};
  FrameOutcome first = run(pieces[0]);
  EXPECT_EQ(first.fate, Fate::forward);
  EXPECT_EQ(first.egress_slot, 1u);
  EXPECT_NE(first.release, kNoDatagram) << "what waits for the first fragment is to be released";
  net::IpAddress backend = destination_of(pieces[0]);
  EXPECT_EQ(backend, maglev_backend(40000)) << "the backend of the flow's unfragmented datagrams";
  for (std::size_t i = 1; i < pieces.size(); ++i) {
    EXPECT_EQ(run(pieces[i]), FrameOutcome::to(1)) << i;
  }
  for (const Bytes& f : pieces) {
    EXPECT_EQ(destination_of(f), backend);
    EXPECT_EQ(f[kL3 + 8], 63) << "TTL";
    EXPECT_TRUE(std::equal(kBackendMac.begin(), kBackendMac.end(), f.begin()));
    expect_ipv4_header_checksum(f, kL3);
  }
  EXPECT_EQ(stored16(pieces[0], kL3 + 20 + 2), 53) << "destination port";
  // The UDP checksum covers the whole datagram: right for the backend, once reassembled.
  Bytes datagram = reassembled(pieces);
  packet::ParsedPacket p;
  ASSERT_EQ(packet::parse_frame({datagram.data(), datagram.size()}, p), packet::ParseError::none);
  EXPECT_EQ(stored16(datagram, p.l4_checksum_offset()), reference_checksums(datagram, p).l4);
  EXPECT_EQ(slice(datagram, p.payload_offset, 3000), slice(whole.bytes, p.payload_offset, 3000));
  EXPECT_EQ(counters_.fragments_forwarded.value(), 3u);
}

TEST_F(IpHopTest, ABackendsFragmentedReplyLeavesFromTheVip) {
  FrameSpec spec = reply("10.2.0.3");
  spec.payload.assign(2000, 'r');
  BuiltFrame whole = build_frame(spec);
  Bytes first = ipv4_fragment(whole, 0, 1480, true);
  Bytes last = ipv4_fragment(whole, 1480, 528, false);
  ASSERT_EQ(run(first, 1).fate, Fate::forward);
  ASSERT_EQ(run(last, 1), FrameOutcome::to(0));
  for (const Bytes& f : {first, last}) {
    EXPECT_EQ(slice(f, kL3 + 12, 4), v4("10.0.0.10")) << "source: the VIP";
    EXPECT_EQ(destination_of(f), ip("10.1.0.5"));
    EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), f.begin()));
    expect_ipv4_header_checksum(f, kL3);
  }
  Bytes datagram = reassembled({first, last});
  packet::ParsedPacket p;
  ASSERT_EQ(packet::parse_frame({datagram.data(), datagram.size()}, p), packet::ParseError::none);
  EXPECT_EQ(p.src_port, 53);
  EXPECT_EQ(stored16(datagram, p.l4_checksum_offset()), reference_checksums(datagram, p).l4);
}

TEST_F(IpHopTest, ALaterFragmentBeforeItsFirstWaitsAndThenFollowsIt) {
  BuiltFrame whole = big_request(40001, 2000);
  Bytes later = ipv4_fragment(whole, 1480, 528, false);
  const Bytes later_as_sent = later;
  FrameOutcome waits = run(later);
  ASSERT_EQ(waits.fate, Fate::wait);
  EXPECT_EQ(later, later_as_sent) << "held as it came";
  ASSERT_TRUE(hop_.fragments.hold(waits.datagram, 0x1000, static_cast<std::uint32_t>(later.size()),
                                  now_ms_));

  Bytes first = ipv4_fragment(whole, 0, 1480, true);
  FrameOutcome decides = run(first);
  ASSERT_EQ(decides.fate, Fate::forward);
  EXPECT_EQ(decides.release, waits.datagram);
  std::array<FragmentTable::HeldFrame, 4> taken;
  ASSERT_EQ(hop_.fragments.take_held(decides.release, taken), 1u);
  EXPECT_EQ(taken[0].addr, 0x1000u);
  EXPECT_EQ(follow_held({later.data(), later.size()}, *snapshot_, {queue_, counters_},
                        hop_.fragments, decides.release, hop_.at(now_ms_, kRoom)),
            FrameOutcome::to(1));
  EXPECT_EQ(destination_of(later), destination_of(first));
  EXPECT_EQ(destination_of(first), maglev_backend(40001));
  expect_ipv4_header_checksum(later, kL3);
  EXPECT_EQ(counters_.fragments_forwarded.value(), 2u);
}

TEST_F(IpHopTest, EveryFragmentToAReflectServiceComesBackFromItsVip) {
  FrameSpec spec = large_request(40000, 2000);
  spec.dst = addr("10.0.0.20");  // the reflect service
  spec.dst_port = 7;
  BuiltFrame whole = build_frame(spec);
  Bytes middle = ipv4_fragment(whole, 1000, 504, true);
  FrameOutcome waits = run(middle);
  ASSERT_EQ(waits.fate, Fate::wait);
  ASSERT_TRUE(hop_.fragments.hold(waits.datagram, 0x1000, 600, now_ms_));
  Bytes first = ipv4_fragment(whole, 0, 1000, true);
  ASSERT_EQ(run(first).fate, Fate::forward);
  EXPECT_EQ(follow_held({middle.data(), middle.size()}, *snapshot_, {queue_, counters_},
                        hop_.fragments, waits.datagram, hop_.at(now_ms_, kRoom)),
            FrameOutcome::to(0))
      << "back out of the port it came in on";
  Bytes last = ipv4_fragment(whole, 1504, 504, false);
  EXPECT_EQ(run(last), FrameOutcome::to(0));
  std::vector<Bytes> pieces = {first, middle, last};
  for (const Bytes& f : pieces) {
    EXPECT_EQ(slice(f, kL3 + 12, 4), v4("10.0.0.20")) << "source: the VIP";
    EXPECT_EQ(destination_of(f), ip("10.1.0.5"));
    EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), f.begin()));
    expect_ipv4_header_checksum(f, kL3);
  }
  Bytes datagram = reassembled(pieces);
  packet::ParsedPacket p;
  ASSERT_EQ(packet::parse_frame({datagram.data(), datagram.size()}, p), packet::ParseError::none);
  EXPECT_EQ(p.src_port, 7);
  EXPECT_EQ(p.dst_port, 40000);
  EXPECT_EQ(slice(datagram, p.payload_offset, 2000), slice(whole.bytes, p.payload_offset, 2000))
      << "only the first fragment has ports to swap";
  EXPECT_EQ(stored16(datagram, p.l4_checksum_offset()), reference_checksums(datagram, p).l4);
}

TEST_F(IpHopTest, DuplicatesOverlapsAndTinyFirstFragmentsAreDroppedWithTheirReasons) {
  BuiltFrame whole = big_request(40002, 3000);
  auto fragment = [&](std::size_t offset, std::size_t data, bool more) {
    return ipv4_fragment(whole, offset, data, more);
  };
  Bytes first = fragment(0, 1480, true);
  ASSERT_EQ(run(first).fate, Fate::forward);
  Bytes again = fragment(0, 1480, true);
  EXPECT_EQ(run(again), FrameOutcome::dropped(Drop::fragment_duplicate));
  Bytes overlapping = fragment(1400, 1480, true);
  FrameOutcome refused = run(overlapping);
  EXPECT_EQ(refused.fate, Fate::drop);
  EXPECT_EQ(refused.drop, Drop::fragment_overlap);
  EXPECT_NE(refused.release, kNoDatagram) << "what waits for the refused datagram goes too";
  Bytes rest = fragment(2960, 48, false);
  EXPECT_EQ(run(rest), FrameOutcome::dropped(Drop::fragment_refused));

  // A first fragment with 4 bytes of UDP header: dropped, and its datagram with it.
  BuiltFrame other = big_request(40003, 100);
  Bytes tiny = with_id(ipv4_fragment(other, 0, 4, true), 0x7777);
  Bytes tiny_rest = with_id(ipv4_fragment(other, 8, 100, false), 0x7777);
  FrameOutcome tiny_outcome = run(tiny);
  EXPECT_EQ(tiny_outcome.fate, Fate::drop);
  EXPECT_EQ(tiny_outcome.drop, Drop::fragment_tiny);
  EXPECT_EQ(run(tiny_rest), FrameOutcome::dropped(Drop::fragment_refused))
      << "a later fragment of a datagram whose first was tiny is not held for a first to come";
  EXPECT_EQ(hop_.fragments.held_count(), 0u);
}

TEST_F(IpHopTest, APortUnreachableFromABackendReachesTheClientFromTheVip) {
  net::IpAddress backend = maglev_backend(40000);
  // The request as the gateway sent it to the backend, quoted by the backend's stack.
  FrameSpec sent = request(40000);
  sent.dst = backend.bytes;
  sent.hop_limit = 63;
  IcmpSpec error;
  error.src = backend.bytes;
  error.dst = addr("10.1.0.5");
  error.quote = ip_packet(build_frame(sent));
  Bytes f = build_icmp_frame(error).bytes;
  std::size_t length = f.size();

  ASSERT_EQ(run(f, 1), FrameOutcome::to(0));
  EXPECT_EQ(f.size(), length);
  EXPECT_EQ(slice(f, kL3 + 12, 4), v4("10.0.0.10")) << "outer source: the VIP";
  EXPECT_EQ(destination_of(f), ip("10.1.0.5"));
  EXPECT_EQ(f[kL3 + 8], 63) << "TTL";
  EXPECT_EQ(f[kL3 + 20], 3);
  EXPECT_EQ(f[kL3 + 21], 3);
  // The quote is the request as the client sent it: client:40000 -> VIP:53.
  FrameSpec as_client_sent = request(40000);
  as_client_sent.hop_limit = 63;
  EXPECT_EQ(slice(f, kL3 + 28, f.size() - kL3 - 28), ip_packet(build_frame(as_client_sent)));
  expect_icmp_checksums(f, true);
  EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), f.begin()));
  EXPECT_EQ(counters_.icmp_translated.value(), 1u);
}

TEST_F(IpHopTest, AnErrorAboutAReplyReachesTheBackendTheFlowTableChose) {
  // A port whose Maglev backend changes when a fourth backend is added.
  config::Config three = lab_config();
  config::Config four = lab_config({"10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53", "10.2.0.5:53"});
  std::uint16_t port = 0;
  net::IpAddress before, after;
  for (std::uint16_t p = 41000; p < 41100 && port == 0; ++p) {
    snapshot_ = ip_hop_snapshot(three);
    before = maglev_backend(p);
    snapshot_ = ip_hop_snapshot(four);
    after = maglev_backend(p);
    if (before != after) port = p;
  }
  ASSERT_NE(port, 0) << "no flow moved in 100";

  FlowTable table{4096, 30000, counters_.flows};
  snapshot_ = ip_hop_snapshot(three);
  auto request_frame = build_frame(request(port)).bytes;
  ASSERT_EQ(run(request_frame, 0, {&table, 1000}), FrameOutcome::to(1));
  ASSERT_EQ(destination_of(request_frame), before);
  snapshot_ = ip_hop_snapshot(four);
  std::uint64_t entries = table.entries_in_use();
  std::uint64_t asked = counters_.flows.hits.value() + counters_.flows.misses.value();

  // The client's stack refuses the reply it got from the VIP.
  FrameSpec got = reply();
  got.src = addr("10.0.0.10");
  got.dst_port = port;
  got.hop_limit = 62;
  IcmpSpec error;
  error.src = addr("10.1.0.5");
  error.dst = addr("10.0.0.10");
  error.quote = ip_packet(build_frame(got));
  Bytes with_table = build_icmp_frame(error).bytes;
  Bytes without_table = with_table;

  ASSERT_EQ(run(with_table, 0, {&table, 2000}), FrameOutcome::to(1));
  EXPECT_EQ(destination_of(with_table), before) << "the flow's backend, not Maglev's new choice";
  EXPECT_EQ(slice(with_table, kL3 + 12, 4), v4("10.1.0.5")) << "outer source kept";
  // The quote is the reply as that backend sent it: backend:53 -> client:port.
  FrameSpec as_sent = got;
  as_sent.src = before.bytes;
  EXPECT_EQ(slice(with_table, kL3 + 28, with_table.size() - kL3 - 28),
            ip_packet(build_frame(as_sent)));
  expect_icmp_checksums(with_table, true);
  EXPECT_TRUE(std::equal(kBackendMac.begin(), kBackendMac.end(), with_table.begin()));
  EXPECT_EQ(table.entries_in_use(), entries) << "an error makes no flow";
  EXPECT_EQ(counters_.flows.hits.value() + counters_.flows.misses.value(), asked);

  ASSERT_EQ(run(without_table), FrameOutcome::to(1));
  EXPECT_EQ(destination_of(without_table), after) << "no flow table: Maglev's choice";
  expect_icmp_checksums(without_table, true);
  EXPECT_EQ(counters_.icmp_translated.value(), 2u);
}

TEST_F(IpHopTest, ErrorsQuotingWhatNoServiceSentOrReceivedAreUnmatched) {
  auto error_frame = [](const std::string& from, const std::string& to, FrameSpec quoted) {
    IcmpSpec e;
    e.src = addr(from);
    e.dst = addr(to);
    e.quote = ip_packet(build_frame(quoted));
    return build_icmp_frame(e).bytes;
  };
  FrameSpec to_stranger = request();
  to_stranger.dst = addr("10.9.9.9");
  FrameSpec from_vip_other_port = reply();
  from_vip_other_port.src = addr("10.0.0.10");
  from_vip_other_port.src_port = 54;
  FrameSpec to_backend = request();
  to_backend.dst = addr("10.2.0.3");
  FrameSpec from_vip = reply();
  from_vip.src = addr("10.0.0.10");
  std::vector<Bytes> unmatched = {
      error_frame("10.2.0.3", "10.1.0.5", to_stranger),           // no service's tuple
      error_frame("10.1.0.5", "10.0.0.10", from_vip_other_port),  // the VIP, a port no service has
      error_frame("10.1.0.5", "10.2.0.3", to_backend),  // about a request, not to its client
      error_frame("10.1.0.5", "10.2.0.3", from_vip),    // about a reply, not to the VIP
  };
  for (std::size_t i = 0; i < unmatched.size(); ++i) {
    EXPECT_EQ(run(unmatched[i], i % 2 ? 0 : 1), FrameOutcome::dropped(Drop::icmp_unmatched)) << i;
  }
  // A quote too short for the UDP header is malformed.
  IcmpSpec truncated;
  truncated.src = addr("10.2.0.3");
  truncated.dst = addr("10.1.0.5");
  truncated.quote = slice(ip_packet(build_frame(to_backend)), 0, 24);
  Bytes short_quote = build_icmp_frame(truncated).bytes;
  EXPECT_EQ(run(short_quote, 1), FrameOutcome::dropped(Drop::malformed));
  EXPECT_EQ(counters_.icmp_translated.value(), 0u);
}

TEST_F(IpHopTest, TtlOneToAVipIsAnsweredWithTimeExceededWithinTheRateLimit) {
  FrameSpec expiring = request();
  expiring.hop_limit = 1;
  const Bytes original = build_frame(expiring).bytes;
  Bytes f = original;
  FrameOutcome o = run(f);
  ASSERT_EQ(o.fate, Fate::forward);
  EXPECT_EQ(o.egress_slot, 0u);
  EXPECT_EQ(o.length, f.size());
  EXPECT_EQ(f.size(), original.size() + 28);
  EXPECT_TRUE(std::equal(kClientMac.begin(), kClientMac.end(), f.begin()));
  EXPECT_TRUE(std::equal(kPort0Mac.begin(), kPort0Mac.end(), f.begin() + 6));
  EXPECT_EQ(slice(f, kL3 + 12, 4), v4("10.1.0.1")) << "the gateway's port 0";
  EXPECT_EQ(destination_of(f), ip("10.1.0.5"));
  EXPECT_EQ(f[kL3 + 9], IPPROTO_ICMP);
  EXPECT_EQ(f[kL3 + 20], packet::kIcmpTimeExceeded);
  EXPECT_EQ(f[kL3 + 21], 0);
  EXPECT_EQ(slice(f, kL3 + 28, f.size() - kL3 - 28), slice(original, kL3, original.size() - kL3))
      << "the datagram as it came: to the VIP, TTL 1";
  expect_icmp_checksums(f, true);
  EXPECT_EQ(counters_.icmp_time_exceeded.value(), 1u);
  EXPECT_EQ(drops(Drop::ttl_expired), 1u) << "the datagram itself is counted as expired";

  // The per-destination burst is 6; the seventh in the same millisecond is not answered.
  for (int i = 1; i < 6; ++i) {
    Bytes again = original;
    EXPECT_EQ(run(again).fate, Fate::forward) << i;
  }
  Bytes limited = original;
  EXPECT_EQ(run(limited), FrameOutcome::dropped(Drop::ttl_expired));
  EXPECT_EQ(limited, original);
  EXPECT_EQ(counters_.icmp_time_exceeded.value(), 6u);
  EXPECT_EQ(counters_.icmp_rate_limited.value(), 1u);
  now_ms_ += 1000;  // one token a second
  Bytes later = original;
  EXPECT_EQ(run(later).fate, Fate::forward);
  EXPECT_EQ(counters_.icmp_time_exceeded.value(), 7u);
}

TEST_F(IpHopTest, ADfDatagramOverTheEgressMtuIsAnsweredWithFragmentationNeeded) {
  snapshot_ = ip_hop_snapshot(lab_config(), 1500, 1400);
  Bytes original = big_request(40000, 1450).bytes;  // 1,478 bytes of IP
  set_dont_fragment(original);
  Bytes f = original;
  FrameOutcome o = run(f);
  ASSERT_EQ(o.fate, Fate::forward);
  EXPECT_EQ(o.egress_slot, 0u);
  EXPECT_EQ(f.size(), kL3 + packet::kIcmpErrorMaxIpBytes4);
  EXPECT_EQ(slice(f, kL3 + 12, 4), v4("10.1.0.1"));
  EXPECT_EQ(destination_of(f), ip("10.1.0.5"));
  EXPECT_EQ(f[kL3 + 20], packet::kIcmpDestinationUnreachable);
  EXPECT_EQ(f[kL3 + 21], packet::kIcmpFragmentationNeeded);
  EXPECT_EQ(stored16(f, kL3 + 26), 1400) << "the next link's MTU";
  // The quote: the datagram as the client sent it (to VIP:53, its TTL and checksums), cut at 576.
  EXPECT_EQ(slice(f, kL3 + 28, f.size() - kL3 - 28),
            slice(original, kL3, packet::kIcmpErrorMaxIpBytes4 - 28));
  EXPECT_EQ(ipv4_at(f, kL3 + 28 + 16), ip("10.0.0.10")) << "quoted destination: the VIP";
  EXPECT_EQ(stored16(f, kL3 + 28 + 20 + 2), 53) << "quoted destination port";
  expect_icmp_checksums(f, false);
  EXPECT_EQ(counters_.icmp_too_big.value(), 1u);
  EXPECT_EQ(drops(Drop::too_big), 1u);
}

TEST_F(IpHopTest, AnIpv4DatagramWithoutDfOverTheEgressMtuIsForwardedToBeCut) {
  snapshot_ = ip_hop_snapshot(lab_config(), 1500, 1400);
  Bytes f = big_request(40000, 1450).bytes;
  FrameOutcome o = run(f);
  EXPECT_EQ(o.fate, Fate::forward);
  EXPECT_EQ(o.egress_slot, 1u);
  EXPECT_EQ(o.fragment_mtu, 1400u);
  EXPECT_EQ(o.length, 0u);
  EXPECT_EQ(destination_of(f), maglev_backend(40000)) << "translated; the worker cuts it";
  EXPECT_EQ(f[kL3 + 8], 63);
  // One that fits is forwarded whole.
  Bytes small = big_request(40000, 1300).bytes;
  EXPECT_EQ(run(small), FrameOutcome::to(1));
}

TEST_F(IpHopTest, Ipv6FragmentsOfABalancedDatagramFollowTheirFirst) {
  snapshot_ = ip_hop_snapshot(dual_stack_config());
  BuiltFrame whole = big_request6(40000, 3000);  // 3,008 bytes of UDP
  std::vector<Bytes> pieces = {ipv6_fragment(whole, 0, 1232, true, 0xf00d),
                               ipv6_fragment(whole, 1232, 1232, true, 0xf00d),
                               ipv6_fragment(whole, 2464, 544, false, 0xf00d)};
  FrameOutcome waits = run(pieces[2]);
  ASSERT_EQ(waits.fate, Fate::wait);
  ASSERT_TRUE(hop_.fragments.hold(waits.datagram, 0x1000, 600, now_ms_));
  FrameOutcome first = run(pieces[0]);
  ASSERT_EQ(first.fate, Fate::forward);
  EXPECT_EQ(first.egress_slot, 1u);
  EXPECT_EQ(first.release, waits.datagram);
  EXPECT_EQ(follow_held({pieces[2].data(), pieces[2].size()}, *snapshot_, {queue_, counters_},
                        hop_.fragments, first.release, hop_.at(now_ms_, kRoom)),
            FrameOutcome::to(1));
  EXPECT_EQ(run(pieces[1]), FrameOutcome::to(1));
  Bytes backend = slice(pieces[0], kL3 + 24, 16);
  EXPECT_TRUE(backend == v6("2001:db8:2::2") || backend == v6("2001:db8:2::3"));
  for (const Bytes& f : pieces) {
    EXPECT_EQ(slice(f, kL3 + 24, 16), backend);
    EXPECT_EQ(f[kL3 + 7], 63) << "hop limit";
    EXPECT_TRUE(std::equal(kBackendMac.begin(), kBackendMac.end(), f.begin()));
  }
  Bytes datagram = reassembled6(pieces);
  packet::ParsedPacket p;
  ASSERT_EQ(packet::parse_frame({datagram.data(), datagram.size()}, p), packet::ParseError::none);
  EXPECT_EQ(p.dst_port, 53);
  EXPECT_EQ(stored16(datagram, p.l4_checksum_offset()), reference_checksums(datagram, p).l4)
      << "the UDP checksum, over the IPv6 pseudo-header of the backend";
  EXPECT_EQ(counters_.fragments_forwarded.value(), 3u);
}

TEST_F(IpHopTest, AnIpv6DatagramOverTheEgressMtuIsAnsweredWithPacketTooBig) {
  snapshot_ = ip_hop_snapshot(dual_stack_config(), 1500, 1400);
  const Bytes original = big_request6(40000, 1400).bytes;  // 1,448 bytes of IP
  Bytes f = original;
  FrameOutcome o = run(f);
  ASSERT_EQ(o.fate, Fate::forward);
  EXPECT_EQ(o.egress_slot, 0u);
  ASSERT_EQ(f.size(), kL3 + packet::kIcmpErrorMaxIpBytes6);
  std::size_t icmp = kL3 + 40;
  EXPECT_EQ(f[kL3 + 6], IPPROTO_ICMPV6);
  EXPECT_EQ(f[kL3 + 7], 64);
  EXPECT_EQ(slice(f, kL3 + 8, 16), v6("2001:db8:1::1")) << "the gateway's port 0";
  EXPECT_EQ(slice(f, kL3 + 24, 16), v6("2001:db8:1::5"));
  EXPECT_EQ(f[icmp], packet::kIcmp6PacketTooBig);
  EXPECT_EQ(f[icmp + 1], 0);
  EXPECT_EQ(stored16(f, icmp + 4), 0);
  EXPECT_EQ(stored16(f, icmp + 6), 1400) << "the next link's MTU";
  EXPECT_EQ(slice(f, icmp + 8, f.size() - icmp - 8),
            slice(original, kL3, packet::kIcmpErrorMaxIpBytes6 - 48))
      << "the datagram as the client sent it, to the VIP, cut at 1,280 bytes";
  EXPECT_EQ(reference_icmp_sum(f, kL3, icmp, f.size() - icmp, false), 0xffff)
      << "ICMPv6 checksum with its pseudo-header";
  EXPECT_EQ(counters_.icmp_too_big.value(), 1u);
  EXPECT_EQ(drops(Drop::too_big), 1u);
}

TEST_F(IpHopTest, AnIpv6PortUnreachableFromABackendReachesTheClientFromTheVip) {
  snapshot_ = ip_hop_snapshot(dual_stack_config());
  Bytes request_frame = big_request6(40000, 20).bytes;
  ASSERT_EQ(run(request_frame), FrameOutcome::to(1));
  std::array<std::uint8_t, 16> backend{};
  std::copy_n(request_frame.begin() + kL3 + 24, 16, backend.begin());
  IcmpSpec error;
  error.version = packet::IpVersion::v6;
  error.src = backend;
  error.dst = addr("2001:db8:1::5");
  error.type = packet::kIcmp6DestinationUnreachable;
  error.code = 4;  // port unreachable
  error.quote = slice(request_frame, kL3, request_frame.size() - kL3);
  Bytes f = build_icmp_frame(error).bytes;

  ASSERT_EQ(run(f, 1), FrameOutcome::to(0));
  std::size_t icmp = kL3 + 40;
  EXPECT_EQ(slice(f, kL3 + 8, 16), v6("2001:db8::10")) << "outer source: the VIP";
  EXPECT_EQ(f[kL3 + 7], 63) << "hop limit";
  const Bytes as_sent = big_request6(40000, 20).bytes;
  Bytes quote = slice(f, icmp + 8, f.size() - icmp - 8);
  EXPECT_EQ(slice(quote, 8, 32), slice(as_sent, kL3 + 8, 32)) << "client -> VIP";
  EXPECT_EQ(slice(quote, 40, quote.size() - 40),
            slice(as_sent, kL3 + 40, as_sent.size() - kL3 - 40))
      << "the UDP header and data as the client sent them, checksum included";
  EXPECT_EQ(reference_icmp_sum(f, kL3, icmp, f.size() - icmp, false), 0xffff);
  EXPECT_EQ(counters_.icmp_translated.value(), 1u);
}

}  // namespace
}  // namespace ferry::fastpath
