// The worker as a direct-server-return gateway for packets too big for the tunnel: an IPv4 request
// without DF (a datagram, or a fragment of one) is cut to the tunnel's MTU and every piece leaves
// in its own outer header to the same backend, as a router fragments what it may; with DF the
// client gets fragmentation needed instead. Every frame is accounted for afterwards.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tests/unit/fastpath/worker_fixture.hh"
#include "tests/unit/packet/ip_hop_builder.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using packet::test::build_frame;
using Bytes = std::vector<std::uint8_t>;

constexpr std::size_t kL3 = 14;
constexpr std::size_t kGue4 = 28;  // outer IPv4 + UDP (GUE's variant 1: no GUE header)
constexpr std::uint16_t kGuePort = 7000;

std::uint16_t be16(const Bytes& f, std::size_t at) {
  return static_cast<std::uint16_t>(f[at] << 8 | f[at + 1]);
}

class WorkerEncapTest : public WorkerTest {
 protected:
  // The lab's dns service forwarding GUE, its backends behind port 1 of MTU `backend_mtu`.
  void start_dsr(std::uint32_t backend_mtu) {
    config::Config c = lab_config();
    c.services[0].forwarding = config::Forwarding::gue;
    c.xdp.encap = config::EncapConfig{ip("10.9.0.1"), std::nullopt, ip("2001:db8:9::1"), kGuePort};
    start({0, 1}, 128, config_tables(c));
    auto s = snapshot(config_tables(c), next_hop_tables());
    s->ports = port_facts(1500, backend_mtu);
    board_->publish(std::move(s));
  }
  void receive_bytes(std::size_t port, const Bytes& bytes) {
    ASSERT_TRUE(fakes_[port]->receive(bytes));
  }
  std::uint64_t encapsulated() const {
    std::uint64_t n = 0;
    for (const auto& c : worker_->counters().encapsulated_packets) n += c.value();
    return n;
  }
  // Every frame of `sent` is GUE over IPv4 to one backend, within `mtu`, holding an IPv4 fragment
  // of the client's datagram to the VIP one hop less with a right header checksum; returns the
  // datagram's payload bytes as the pieces' offsets place them.
  Bytes reassemble(const std::vector<Bytes>& sent, std::uint32_t mtu) {
    std::set<std::vector<std::uint8_t>> outer_headers;  // destination, UDP source port
    Bytes payload;
    for (const Bytes& f : sent) {
      EXPECT_LE(f.size() - kL3, mtu);
      EXPECT_EQ(f[kL3 + 9], IPPROTO_UDP) << "GUE";
      EXPECT_EQ(be16(f, kL3 + 6) & 0x4000, 0) << "the outer packet is never fragmented itself";
      EXPECT_EQ(be16(f, kL3 + 20 + 2), kGuePort);
      outer_headers.insert({f.begin() + kL3 + 16, f.begin() + kL3 + 22});
      const std::size_t inner = kL3 + kGue4;
      EXPECT_EQ(f[inner + 8], 63) << "the inner packet one hop less";
      EXPECT_EQ(be16(f, inner + 10), packet::test::reference_ipv4_checksum(f, inner, 20));
      EXPECT_EQ(Bytes(f.begin() + inner + 16, f.begin() + inner + 20), (Bytes{10, 0, 0, 10}));
      const std::size_t offset = (be16(f, inner + 6) & 0x1fff) * 8u;
      const std::size_t data = be16(f, inner + 2) - 20u;
      EXPECT_EQ(f.size(), inner + 20 + data);
      if (payload.size() < offset + data) payload.resize(offset + data);
      std::copy(f.begin() + static_cast<std::ptrdiff_t>(inner + 20), f.end(),
                payload.begin() + static_cast<std::ptrdiff_t>(offset));
    }
    EXPECT_EQ(outer_headers.size(), 1u) << "one backend and one outer flow for every piece";
    return payload;
  }
};

// 1,708 bytes of UDP over a tunnel link of 1,400: pieces of at most 1,372 IP bytes inside.
TEST_F(WorkerEncapTest, ARequestWithoutDfTooBigForTheTunnelLeavesInEncapsulatedPieces) {
  start_dsr(1400);
  const auto whole = build_frame(large_request(40000, 1700));
  receive_bytes(0, whole.bytes);
  worker_->poll_once();
  const std::vector<Bytes> sent = fakes_[1]->transmit();
  ASSERT_EQ(sent.size(), 2u) << "1,352 data bytes, then the other 356";
  EXPECT_EQ(reassemble(sent, 1400), Bytes(whole.bytes.begin() + kL3 + 20, whole.bytes.end()));
  EXPECT_NE(be16(sent[0], kL3 + kGue4 + 6) & 0x2000, 0) << "MF on the first piece";
  EXPECT_EQ(be16(sent[1], kL3 + kGue4 + 6) & 0x2000, 0) << "not on the last";
  EXPECT_TRUE(fakes_[0]->transmit().empty()) << "no ICMP error to the client";
  EXPECT_EQ(worker_->counters().fragments_made.value(), 2u);
  EXPECT_EQ(encapsulated(), 2u);
  EXPECT_EQ(drops(Drop::too_big), 0u);
  worker_->poll_once();
  expect_conserved();
}

// The client's own fragments of a 3,008-byte datagram, each too big once encapsulated: the first
// is cut and decides the backend, the second is cut and follows it there.
TEST_F(WorkerEncapTest, EveryFragmentOfADatagramIsCutAgainForTheTunnel) {
  start_dsr(1400);
  const auto whole = build_frame(large_request(40000, 3000));
  receive_bytes(0, packet::test::ipv4_fragment(whole, 0, 1480, true));
  receive_bytes(0, packet::test::ipv4_fragment(whole, 1480, 1480, true));
  receive_bytes(0, packet::test::ipv4_fragment(whole, 2960, 48, false));
  worker_->poll_once();
  const std::vector<Bytes> sent = fakes_[1]->transmit();
  ASSERT_EQ(sent.size(), 5u) << "two pieces of each full fragment, the last one whole";
  EXPECT_EQ(reassemble(sent, 1400), Bytes(whole.bytes.begin() + kL3 + 20, whole.bytes.end()));
  EXPECT_EQ(worker_->counters().fragments_made.value(), 4u);
  EXPECT_EQ(encapsulated(), 5u);
  worker_->poll_once();
  expect_conserved();
}

// With DF the client is told the tunnel's MTU, as before: nothing is cut.
TEST_F(WorkerEncapTest, ARequestWithDfTooBigForTheTunnelIsAnsweredWithFragmentationNeeded) {
  start_dsr(1400);
  auto whole = build_frame(large_request(40000, 1700));
  whole.bytes[kL3 + 6] |= 0x40;
  packet::test::fix_ipv4_checksum(whole.bytes, kL3);
  receive_bytes(0, whole.bytes);
  worker_->poll_once();
  EXPECT_TRUE(fakes_[1]->transmit().empty());
  const std::vector<Bytes> answer = fakes_[0]->transmit();
  ASSERT_EQ(answer.size(), 1u);
  const std::size_t icmp = kL3 + 20;
  EXPECT_EQ(answer[0][icmp], 3);
  EXPECT_EQ(answer[0][icmp + 1], 4) << "fragmentation needed";
  EXPECT_EQ(be16(answer[0], icmp + 6), 1400 - kGue4) << "the MTU less the outer header";
  EXPECT_EQ(worker_->counters().fragments_made.value(), 0u);
  EXPECT_EQ(drops(Drop::too_big), 1u);
  worker_->poll_once();
  expect_conserved();
}

}  // namespace
}  // namespace ferry::fastpath
