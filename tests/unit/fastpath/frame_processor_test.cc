// The per-frame decision of the AF_XDP workers against hand-built frames and tables.
#include "lib/fastpath/frame_processor.hh"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "lib/packet/parse.hh"
#include "tests/unit/fastpath/lab_tables.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using packet::test::build_frame;
using packet::test::reference_checksums;
using packet::test::stored16;

class FrameProcessorTest : public ::testing::Test {
 protected:
  FrameOutcome run(std::vector<std::uint8_t>& frame, std::uint32_t ingress = 0,
                   FlowAffinity flows = {}) {
    return process_frame({frame.data(), frame.size()}, *snapshot_, ingress, {queue_, counters_},
                         flows);
  }
  // Where a request of client port `port` goes, through `flows` (none: pure Maglev).
  net::IpAddress backend_of(std::uint16_t port, FlowAffinity flows) {
    auto frame = build_frame(request(port)).bytes;
    EXPECT_EQ(run(frame, 0, flows), FrameOutcome::to(1));
    return parsed(frame).destination_ip();
  }
  packet::ParsedPacket parsed(const std::vector<std::uint8_t>& frame) {
    packet::ParsedPacket p;
    EXPECT_EQ(packet::parse_frame({frame.data(), frame.size()}, p), packet::ParseError::none);
    return p;
  }
  void expect_checksums_valid(const std::vector<std::uint8_t>& frame) {
    packet::ParsedPacket p = parsed(frame);
    auto ref = reference_checksums(frame, p);
    EXPECT_EQ(stored16(frame, p.l3_offset + 10), ref.ipv4_header);
    EXPECT_EQ(stored16(frame, p.l4_checksum_offset()), ref.l4);
  }
  packet::MacAddress mac_at(const std::vector<std::uint8_t>& frame, std::size_t at) {
    packet::MacAddress m;
    std::memcpy(m.data(), frame.data() + at, 6);
    return m;
  }

  std::unique_ptr<Snapshot> snapshot_ = snapshot(config_tables(lab_config()), next_hop_tables());
  ResolutionQueue queue_;
  WorkerCounters counters_;
};

TEST_F(FrameProcessorTest, BalancedRequestGoesToABackendOutOfItsKernelRoutesPort) {
  auto frame = build_frame(request()).bytes;
  FrameOutcome o = run(frame);
  ASSERT_EQ(o, FrameOutcome::to(1));
  packet::ParsedPacket p = parsed(frame);
  net::IpAddress dst = p.destination_ip();
  EXPECT_TRUE(dst == ip("10.2.0.2") || dst == ip("10.2.0.3") || dst == ip("10.2.0.4"))
      << dst.to_string();
  EXPECT_EQ(p.dst_port, 53);
  EXPECT_EQ(p.source_ip(), ip("10.1.0.5"));
  EXPECT_EQ(p.hop_limit, 63);
  EXPECT_EQ(mac_at(frame, 0), kBackendMac);
  EXPECT_EQ(mac_at(frame, 6), kPort1Mac);
  expect_checksums_valid(frame);
}

TEST_F(FrameProcessorTest, BackendReplyLeavesTowardsTheClientWithTheVipAsSource) {
  auto frame = build_frame(reply()).bytes;
  ASSERT_EQ(run(frame, 1), FrameOutcome::to(0));
  packet::ParsedPacket p = parsed(frame);
  EXPECT_EQ(p.source_ip(), ip("10.0.0.10"));
  EXPECT_EQ(p.src_port, 53);
  EXPECT_EQ(p.destination_ip(), ip("10.1.0.5"));
  EXPECT_EQ(mac_at(frame, 0), kClientMac);
  EXPECT_EQ(mac_at(frame, 6), kPort0Mac);
  expect_checksums_valid(frame);
}

TEST_F(FrameProcessorTest, ConfiguredRouteUsesTheKernelsGatewayOnTheViaPort) {
  auto frame = build_frame(routed(64)).bytes;
  ASSERT_EQ(run(frame), FrameOutcome::to(1));
  packet::ParsedPacket p = parsed(frame);
  EXPECT_EQ(p.hop_limit, 63);
  EXPECT_EQ(p.destination_ip(), ip("10.3.7.9")) << "routing never rewrites addresses";
  EXPECT_EQ(mac_at(frame, 0), kRouterMac) << "the next hop is the gateway 10.2.0.254";
  EXPECT_EQ(mac_at(frame, 6), kPort1Mac);
  expect_checksums_valid(frame);
}

TEST_F(FrameProcessorTest, ReflectServiceSendsTheFrameBackOutOfItsIngressPort) {
  auto spec = request();
  spec.dst = addr("10.0.0.20");
  spec.dst_port = 7;
  auto frame = build_frame(spec).bytes;
  ASSERT_EQ(run(frame, 0), FrameOutcome::to(0));
  packet::ParsedPacket p = parsed(frame);
  EXPECT_EQ(p.destination_ip(), ip("10.1.0.5"));
  EXPECT_EQ(p.source_ip(), ip("10.0.0.20"));
  EXPECT_EQ(mac_at(frame, 0), kClientMac);
}

TEST_F(FrameProcessorTest, EachDropHasItsReason) {
  auto ttl_one = build_frame(routed(1)).bytes;
  EXPECT_EQ(run(ttl_one), FrameOutcome::dropped(Drop::ttl_expired));

  auto truncated = build_frame(request()).bytes;
  truncated.resize(30);
  EXPECT_EQ(run(truncated), FrameOutcome::dropped(Drop::malformed));

  auto bad_ihl = build_frame(request()).bytes;
  bad_ihl[14] = 0x44;
  EXPECT_EQ(run(bad_ihl), FrameOutcome::dropped(Drop::malformed));

  auto tcp = request();
  tcp.protocol = IPPROTO_TCP;
  auto tcp_frame = build_frame(tcp).bytes;
  EXPECT_EQ(run(tcp_frame), FrameOutcome::dropped(Drop::unexpected)) << "XDP passes TCP";

  auto fragment = build_frame(request()).bytes;
  fragment[14 + 6] = 0x20;  // more fragments
  EXPECT_EQ(run(fragment), FrameOutcome::dropped(Drop::unexpected)) << "XDP passes fragments";

  auto stranger = request();
  stranger.dst = addr("192.0.2.1");
  auto stranger_frame = build_frame(stranger).bytes;
  EXPECT_EQ(run(stranger_frame), FrameOutcome::dropped(Drop::unexpected));

  // The reply's client is not behind any of our ports' kernel routes.
  auto lost = reply();
  lost.dst = addr("172.16.0.1");
  auto lost_frame = build_frame(lost).bytes;
  EXPECT_EQ(run(lost_frame, 1), FrameOutcome::dropped(Drop::no_route));
}

TEST_F(FrameProcessorTest, NoBackendUpDropsAsNoBackend) {
  packet::ServiceTableOptions all_down;
  all_down.backend_up = [](const config::ServiceConfig&, const net::Endpoint&) { return false; };
  snapshot_ = snapshot(config_tables(lab_config(), all_down), next_hop_tables());
  auto frame = build_frame(request()).bytes;
  EXPECT_EQ(run(frame), FrameOutcome::dropped(Drop::no_backend));
}

TEST_F(FrameProcessorTest, NeighbourMissHoldsTheRoutedFrameAndQueuesTheNextHopOnce) {
  snapshot_ = snapshot(config_tables(lab_config()), next_hop_tables(false));
  NeighbourKey gateway{1, packet::IpVersion::v4, addr("10.2.0.254")};
  for (int i = 0; i < 5; ++i) {
    auto frame = build_frame(routed()).bytes;
    EXPECT_EQ(run(frame), FrameOutcome::held(1, gateway));
    EXPECT_EQ(parsed(frame).hop_limit, 63) << "routed already, but for the next hop's MAC";
    EXPECT_EQ(mac_at(frame, 6), kPort1Mac);
  }
  auto report = queue_.pop();
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->timed_out_frames, 0u) << "a miss";
  EXPECT_EQ(report->key.port, 1u);
  EXPECT_EQ(report->key.address, addr("10.2.0.254"))
      << "the gateway is resolved, not the destination";
  EXPECT_FALSE(queue_.pop().has_value()) << "a pending request is not queued twice";
  EXPECT_EQ(counters_.resolutions_requested.value(), 1u);
}

// What a local stack sends over veth: the pseudo-header sum only (CHECKSUM_PARTIAL).
std::vector<std::uint8_t> partial(packet::test::FrameSpec spec) {
  spec.partial_checksum = true;
  return build_frame(spec).bytes;
}

TEST_F(FrameProcessorTest, PartialChecksumsAreFinishedOnEveryForwardingPath) {
  auto to_backend = partial(request());
  auto to_client = partial(reply());
  auto routed_frame = partial(routed());
  ASSERT_EQ(run(to_backend), FrameOutcome::to(1));
  ASSERT_EQ(run(to_client, 1), FrameOutcome::to(0));
  ASSERT_EQ(run(routed_frame), FrameOutcome::to(1));
  for (auto* frame : {&to_backend, &to_client, &routed_frame}) expect_checksums_valid(*frame);
  EXPECT_EQ(counters_.checksums_partial.value(), 3u);
  EXPECT_EQ(counters_.checksums_ipv6_zero.value(), 0u);
}

TEST_F(FrameProcessorTest, FullChecksumsKeepTheIncrementalUpdateAndWrongOnesStayWrong) {
  auto good = build_frame(request()).bytes;
  ASSERT_EQ(run(good), FrameOutcome::to(1));
  expect_checksums_valid(good);
  auto bad = build_frame(request()).bytes;
  packet::ParsedPacket p = parsed(bad);
  bad[p.l4_checksum_offset()] ^= 0x10;
  ASSERT_EQ(run(bad), FrameOutcome::to(1));
  packet::ParsedPacket q = parsed(bad);
  EXPECT_NE(stored16(bad, q.l4_checksum_offset()), reference_checksums(bad, q).l4);
  EXPECT_EQ(counters_.checksums_partial.value(), 0u);
}

TEST_F(FrameProcessorTest, HeldFramesHaveTheirPartialChecksumFinishedAlready) {
  snapshot_ = snapshot(config_tables(lab_config()), next_hop_tables(false));
  auto frame = partial(request());
  ASSERT_EQ(run(frame).fate, Fate::hold);
  expect_checksums_valid(frame);
  EXPECT_EQ(counters_.checksums_partial.value(), 1u);
}

TEST_F(FrameProcessorTest, DroppedPartialFramesAreNotFinished) {
  auto frame = partial(routed(1));
  auto before = frame;
  EXPECT_EQ(run(frame), FrameOutcome::dropped(Drop::ttl_expired));
  EXPECT_EQ(frame, before);
  EXPECT_EQ(counters_.checksums_partial.value(), 0u);
}

TEST_F(FrameProcessorTest, Ipv6RouteWithoutKernelRouteIsOnLinkOnTheViaPort) {
  config::Config c = lab_config();
  c.routes.push_back({prefix("2001:db8:3::/48"), "port1", {.udp = true, .tcp = false}});
  std::vector<Neighbour> n = {{{1, packet::IpVersion::v6, addr("2001:db8:3::9")}, kBackendMac}};
  snapshot_ = snapshot(config_tables(c), std::make_shared<const NextHopTables>(
                                             NextHopTables{KernelRouteTable(), NeighbourTable(n)}));
  auto spec = routed();
  spec.version = packet::IpVersion::v6;
  spec.src = addr("2001:db8:1::5");
  spec.dst = addr("2001:db8:3::9");
  auto frame = build_frame(spec).bytes;
  ASSERT_EQ(run(frame), FrameOutcome::to(1));
  EXPECT_EQ(parsed(frame).hop_limit, 63);
  EXPECT_EQ(mac_at(frame, 0), kBackendMac);
}

// 2000 client flows, through the worker's flow table.
class FlowAffinityTest : public FrameProcessorTest {
 protected:
  static constexpr std::uint16_t kFirstPort = 20000;
  static constexpr std::uint16_t kFlows = 2000;
  std::map<std::uint16_t, net::IpAddress> send_all(std::uint32_t now_ms) {
    std::map<std::uint16_t, net::IpAddress> to;
    for (std::uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
      to[port] = backend_of(port, {&table_, now_ms});
    }
    return to;
  }
  void use(const config::Config& c, packet::ServiceTableOptions options = {}) {
    snapshot_ = snapshot(config_tables(c, options), next_hop_tables());
  }

  FlowTable table_{65536, 30000, counters_.flows};
};

TEST_F(FlowAffinityTest, FlowsStayOnTheirBackendWhenAFourthIsAdded) {
  std::map<std::uint16_t, net::IpAddress> before = send_all(1000);
  EXPECT_EQ(counters_.flows.misses.value(), kFlows);
  use(lab_config({"10.2.0.2:53", "10.2.0.3:53", "10.2.0.4:53", "10.2.0.5:53"}));
  EXPECT_EQ(send_all(2000), before) << "no established flow changes backend";
  EXPECT_EQ(counters_.flows.hits.value(), kFlows);
  int maglev_moves = 0;
  for (const auto& [port, backend] : before) maglev_moves += backend_of(port, {}) != backend;
  EXPECT_NEAR(maglev_moves, kFlows / 4, kFlows / 10) << "what Maglev alone would have moved";
  int on_fourth = 0;
  for (std::uint16_t port = 30000; port < 30400; ++port) {
    on_fourth += backend_of(port, {&table_, 2000}) == ip("10.2.0.5");
  }
  EXPECT_GT(on_fourth, 50) << "new flows reach the fourth backend";
}

TEST_F(FlowAffinityTest, FlowsMoveWhenTheirBackendGoesDownAndOnlyThose) {
  std::map<std::uint16_t, net::IpAddress> before = send_all(1000);
  packet::ServiceTableOptions down;
  down.backend_up = [](const config::ServiceConfig&, const net::Endpoint& b) {
    return b.address != ip("10.2.0.3");
  };
  use(lab_config(), down);
  std::map<std::uint16_t, net::IpAddress> after = send_all(2000);
  std::uint64_t moved = 0;
  for (const auto& [port, backend] : before) {
    if (backend == ip("10.2.0.3")) {
      ++moved;
      EXPECT_NE(after[port], backend);
    } else {
      EXPECT_EQ(after[port], backend) << port;
    }
  }
  EXPECT_GT(moved, kFlows / 5);
  EXPECT_EQ(counters_.flows.reassigned.value(), moved);
}

TEST_F(FlowAffinityTest, RepliesAndServicesWithoutAffinityNeverTouchTheTable) {
  auto frame = build_frame(reply()).bytes;
  ASSERT_EQ(run(frame, 1, {&table_, 1000}), FrameOutcome::to(0));
  config::Config c = lab_config();
  c.services.front().affinity = config::Affinity::none;
  use(c);
  for (std::uint16_t port = kFirstPort; port < kFirstPort + 100; ++port) {
    EXPECT_EQ(backend_of(port, {&table_, 1000}), backend_of(port, {}));
  }
  EXPECT_EQ(table_.entries_in_use(), 0u);
  EXPECT_EQ(counters_.flows.hits.value() + counters_.flows.misses.value(), 0u);
}

}  // namespace
}  // namespace ferry::fastpath
