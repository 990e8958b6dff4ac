// What process_frame() counts per (service, backend): every balanced frame sent to a backend
// (nat rewrite, fragments, ICMP errors about its replies, encapsulation) and every reply of a nat
// backend sent on, each into its backend's slot with its IP bytes; nothing for what is dropped,
// and nothing for a later fragment whose first was decided under other tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "lib/fastpath/backend_slots.hh"
#include "lib/fastpath/frame_processor.hh"
#include "lib/packet/parse.hh"
#include "tests/unit/fastpath/ip_hop_state.hh"
#include "tests/unit/fastpath/lab_tables.hh"
#include "tests/unit/packet/ip_hop_builder.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using namespace packet::test;

constexpr std::size_t kL3 = 14;
constexpr std::uint32_t kHeadroom = 256;  // before a frame in its UMEM frame, as the kernel leaves
constexpr std::uint32_t kRoom = 2048;     // after it

net::IpAddress destination_of(const Bytes& f) {
  std::array<std::uint8_t, 16> bytes{};
  std::copy_n(f.begin() + kL3 + 16, 4, bytes.begin());
  return {AF_INET, bytes};
}

std::uint32_t ip_bytes(const Bytes& f) {
  return static_cast<std::uint32_t>(f.size() - kL3);
}

// The lab and an encapsulating service: web, 10.0.0.30:80 over IPIP to 10.2.0.2:80 and 10.2.0.3:80.
config::Config lab_with_dsr() {
  config::Config c = lab_config();
  config::ServiceConfig web;
  web.name = "web";
  web.vip = ip("10.0.0.30");
  web.port = 80;
  web.protocols = {.udp = true, .tcp = true};
  web.forwarding = config::Forwarding::ipip;
  web.backends = {endpoint("10.2.0.2:80"), endpoint("10.2.0.3:80")};
  c.services.push_back(web);
  c.xdp.encap = config::EncapConfig{ip("10.2.0.1"), std::nullopt, std::nullopt, 6080};
  return c;
}

class BackendCountingTest : public ::testing::Test {
 protected:
  // Tables for `c` whose backends count into slots_ (a reload, when tables_ are there already).
  void use(const config::Config& c, packet::ServiceTableOptions options = {}) {
    tables_ = config_tables(c, std::move(options), &slots_);
    snapshot_ = snapshot(tables_, next_hop_tables());
    snapshot_->ports = port_facts();
  }
  // process_frame() on `frame` in a UMEM frame's room; `frame` ends as the outcome left it.
  FrameOutcome run(Bytes& frame, std::uint32_t ingress = 0) {
    Bytes room(kHeadroom + frame.size() + kRoom);
    std::copy(frame.begin(), frame.end(), room.begin() + kHeadroom);
    FrameOutcome o =
        process_frame({room.data() + kHeadroom, frame.size()}, *snapshot_, ingress,
                      {queue_, counters_, &backends_}, {}, hop_.at(5000, kRoom, kHeadroom));
    std::size_t start = kHeadroom - o.front;
    std::size_t length = o.length != 0 ? o.length : frame.size();
    frame.assign(room.begin() + static_cast<std::ptrdiff_t>(start),
                 room.begin() + static_cast<std::ptrdiff_t>(start + length));
    return o;
  }
  const BackendTraffic& counted(const std::string& service, const std::string& backend) {
    std::optional<std::uint32_t> slot = slots_.slot_of(service, endpoint(backend));
    EXPECT_TRUE(slot.has_value()) << service << " " << backend;
    return backends_[slot.value_or(0)];
  }
  std::uint64_t all_packets() const {
    std::uint64_t sum = 0;
    for (std::uint32_t s = 0; s < backends_.size(); ++s) {
      sum += backends_[s].in_packets.value() + backends_[s].out_packets.value();
    }
    return sum;
  }

  BackendSlots slots_;
  std::shared_ptr<const ConfigTables> tables_;
  std::unique_ptr<Snapshot> snapshot_;
  BackendCounters backends_{64};
  IpHopState hop_;
  ResolutionQueue queue_;
  WorkerCounters counters_;
};

TEST_F(BackendCountingTest, RequestsCountToTheirBackendAndRepliesFromIt) {
  use(lab_config());
  std::map<std::string, std::uint64_t> sent, bytes;
  for (std::uint16_t port = 40000; port < 40030; ++port) {
    Bytes f = build_frame(request(port)).bytes;
    ASSERT_EQ(run(f), FrameOutcome::to(1));
    std::string backend = destination_of(f).to_string() + ":53";
    ++sent[backend];
    bytes[backend] += ip_bytes(f);
  }
  ASSERT_EQ(sent.size(), 3u) << "30 flows over three backends";
  for (std::uint16_t i = 0; i < 4; ++i) {
    Bytes r = build_frame(reply("10.2.0.3")).bytes;
    ASSERT_EQ(run(r, 1), FrameOutcome::to(0));
    EXPECT_EQ(ip_bytes(r), 28u + reply().payload.size());
  }
  for (const auto& [backend, n] : sent) {
    const BackendTraffic& c = counted("dns", backend);
    EXPECT_EQ(c.in_packets.value(), n) << backend;
    EXPECT_EQ(c.in_bytes.value(), bytes[backend]) << backend;
    bool replied = backend == "10.2.0.3:53";
    EXPECT_EQ(c.out_packets.value(), replied ? 4u : 0u) << backend;
    EXPECT_EQ(c.out_bytes.value(), replied ? 4 * (28u + reply().payload.size()) : 0u) << backend;
  }
}

TEST_F(BackendCountingTest, WhatIsDroppedOrAnsweredIsNotCounted) {
  packet::ServiceTableOptions all_down;
  all_down.backend_up = [](const config::ServiceConfig&, const net::Endpoint&) { return false; };
  use(lab_config(), all_down);
  Bytes f = build_frame(request()).bytes;
  EXPECT_EQ(run(f), FrameOutcome::dropped(Drop::no_backend));
  use(lab_config());
  FrameSpec expiring = request();
  expiring.hop_limit = 1;
  Bytes e = build_frame(expiring).bytes;
  EXPECT_EQ(run(e).fate, Fate::forward) << "time exceeded, to the client";
  EXPECT_EQ(counters_.icmp_time_exceeded.value(), 1u);
  EXPECT_EQ(all_packets(), 0u);
}

TEST_F(BackendCountingTest, EveryFragmentCountsToItsDatagramsBackend) {
  use(lab_config());
  BuiltFrame whole = build_frame(large_request(40000, 3000));
  std::vector<Bytes> pieces = {ipv4_fragment(whole, 0, 1480, true),
                               ipv4_fragment(whole, 1480, 1480, true),
                               ipv4_fragment(whole, 2960, 48, false)};
  std::uint64_t bytes = 0;
  for (Bytes& f : pieces) {
    ASSERT_EQ(run(f).fate, Fate::forward);
    bytes += ip_bytes(f);
  }
  const BackendTraffic& c = counted("dns", destination_of(pieces[0]).to_string() + ":53");
  EXPECT_EQ(c.in_packets.value(), 3u);
  EXPECT_EQ(c.in_bytes.value(), bytes);
  EXPECT_EQ(all_packets(), 3u);
}

TEST_F(BackendCountingTest, LaterFragmentsAfterAReloadAreNotCountedPerBackend) {
  use(lab_config());
  BuiltFrame whole = build_frame(large_request(40000, 3000));
  Bytes first = ipv4_fragment(whole, 0, 1480, true);
  ASSERT_EQ(run(first).fate, Fate::forward);
  // A reload: the backend keeps its slot, but the first fragment's decision names the slot of
  // tables that may have given it to another backend, which later fragments cannot tell.
  std::shared_ptr<const ConfigTables> before = tables_;
  use(lab_config());
  EXPECT_NE(tables_->backend_slots.serial(), before->backend_slots.serial());
  for (std::size_t offset : {1480u, 2960u}) {
    Bytes later = ipv4_fragment(whole, offset, offset == 2960 ? 48 : 1480, offset != 2960);
    ASSERT_EQ(run(later).fate, Fate::forward);
    EXPECT_EQ(destination_of(later), destination_of(first)) << "it still follows its first";
  }
  const BackendTraffic& c = counted("dns", destination_of(first).to_string() + ":53");
  EXPECT_EQ(c.in_packets.value(), 1u);
  EXPECT_EQ(c.in_bytes.value(), ip_bytes(first));
}

TEST_F(BackendCountingTest, AnIcmpErrorAboutAReplyCountsToTheBackendItGoesTo) {
  use(lab_config());
  FrameSpec got = reply();
  got.src = addr("10.0.0.10");
  got.dst_port = 40000;
  IcmpSpec error;
  error.src = addr("10.1.0.5");
  error.dst = addr("10.0.0.10");
  error.quote = ip_packet(build_frame(got));
  Bytes f = build_icmp_frame(error).bytes;
  ASSERT_EQ(run(f), FrameOutcome::to(1));
  const BackendTraffic& c = counted("dns", destination_of(f).to_string() + ":53");
  EXPECT_EQ(c.in_packets.value(), 1u);
  EXPECT_EQ(c.in_bytes.value(), ip_bytes(f));
  EXPECT_EQ(all_packets(), 1u);
}

TEST_F(BackendCountingTest, EncapsulatedRequestsCountTheirInnerPacketsToTheBackend) {
  use(lab_with_dsr());
  std::uint64_t inner_bytes = 0;
  for (std::uint16_t port = 40000; port < 40020; ++port) {
    FrameSpec spec = request(port);
    spec.dst = addr("10.0.0.30");
    spec.dst_port = 80;
    Bytes f = build_frame(spec).bytes;
    inner_bytes += ip_bytes(f);
    ASSERT_EQ(run(f).fate, Fate::forward);
  }
  const BackendTraffic& a = counted("web", "10.2.0.2:80");
  const BackendTraffic& b = counted("web", "10.2.0.3:80");
  EXPECT_EQ(a.in_packets.value() + b.in_packets.value(), 20u);
  EXPECT_GT(a.in_packets.value(), 0u);
  EXPECT_GT(b.in_packets.value(), 0u);
  EXPECT_EQ(a.in_bytes.value() + b.in_bytes.value(), inner_bytes);
  const auto ipip4 = static_cast<std::size_t>(EncapPath::ipip4);
  EXPECT_EQ(counters_.encapsulated_packets[ipip4].value(), 20u);
  EXPECT_EQ(counters_.encapsulated_bytes[ipip4].value(), inner_bytes) << "the same bytes";
  EXPECT_EQ(a.out_packets.value() + b.out_packets.value(), 0u);
}

TEST_F(BackendCountingTest, TablesWithoutSlotsCountNothing) {
  snapshot_ = snapshot(config_tables(lab_config()), next_hop_tables());
  Bytes f = build_frame(request()).bytes;
  ASSERT_EQ(run(f), FrameOutcome::to(1));
  EXPECT_EQ(all_packets(), 0u);
}

}  // namespace
}  // namespace ferry::fastpath
