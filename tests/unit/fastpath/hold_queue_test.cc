// HoldQueue: frames wait per next hop within their bounds, leave in arrival order once a table
// has the MAC, and are dropped after the timeout; every frame held is accounted for once.
#include "lib/fastpath/hold_queue.hh"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "tests/unit/fastpath/lab_tables.hh"

namespace ferry::fastpath {
namespace {

using namespace test;

NeighbourKey hop(std::uint8_t last) {
  return {1, packet::IpVersion::v4, {10, 2, 0, last}};
}

NeighbourTable table_with(std::vector<NeighbourKey> keys) {
  std::vector<Neighbour> n;
  for (const NeighbourKey& k : keys) n.push_back({k, kBackendMac});
  return NeighbourTable(n);
}

TEST(HoldQueue, ReleasesInArrivalOrderOnlyTheResolvedNextHop) {
  HoldQueue q;
  for (std::uint64_t i = 0; i < 6; ++i) ASSERT_TRUE(q.hold(hop(i % 2 ? 3 : 2), 1, i * 4096, 100));
  EXPECT_EQ(q.size(), 6u);
  EXPECT_EQ(q.hops_waiting(), 2u);
  std::vector<std::uint64_t> sent;
  EXPECT_EQ(q.release(table_with({}), [&](const HoldQueue::Frame& f,
                                          const packet::MacAddress&) { sent.push_back(f.addr); }),
            0u);
  EXPECT_EQ(q.release(table_with({hop(2)}),
                      [&](const HoldQueue::Frame& f, const packet::MacAddress& mac) {
                        EXPECT_EQ(mac, kBackendMac);
                        EXPECT_EQ(f.egress_slot, 1u);
                        sent.push_back(f.addr);
                      }),
            3u);
  EXPECT_EQ(sent, (std::vector<std::uint64_t>{0, 2 * 4096, 4 * 4096}));
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.hops_waiting(), 1u);
}

TEST(HoldQueue, BoundsPerNextHopByBytesAndPerWorkerByFrames) {
  HoldQueue q;
  std::uint64_t addr = 0;
  // 64 KiB per next hop: 16 frames of 4 KiB, or 640 DNS answers of 100 bytes.
  for (int i = 0; i < 16; ++i) ASSERT_TRUE(q.hold(hop(3), 1, addr++, 4096));
  EXPECT_FALSE(q.hold(hop(3), 1, addr++, 1)) << "64 KiB per next hop";
  EXPECT_TRUE(q.hold(hop(4), 1, addr++, 4096)) << "another next hop has its own bound";
  // The worker's bound: 512 frames over all next hops.
  std::uint8_t h = 10;
  while (q.size() < HoldQueue::kMaxFrames) {
    for (std::uint32_t i = 0; i < 100 && q.size() < HoldQueue::kMaxFrames; ++i) {
      ASSERT_TRUE(q.hold(hop(h), 1, addr++, 100));
    }
    ++h;
  }
  EXPECT_FALSE(q.hold(hop(200), 1, addr++, 64)) << "512 frames per worker";
  EXPECT_FALSE(q.hold(hop(10), 1, addr++, 64));
}

TEST(HoldQueue, AWorkerWithASmallSlabHoldsAQuarterOfIt) {
  EXPECT_EQ(HoldQueue::for_slab(512), 128u);
  EXPECT_EQ(HoldQueue(HoldQueue::for_slab(8192)).max_frames(), HoldQueue::kMaxFrames);
  HoldQueue q(HoldQueue::for_slab(512));
  for (std::uint64_t i = 0; i < 128; ++i) ASSERT_TRUE(q.hold(hop(2), 1, i, 100));
  EXPECT_FALSE(q.hold(hop(2), 1, 128, 100));
}

TEST(HoldQueue, BoundsTheNextHopsWaitingAtOnce) {
  HoldQueue q;
  for (std::uint32_t i = 0; i < HoldQueue::kMaxHops; ++i) {
    ASSERT_TRUE(q.hold(hop(static_cast<std::uint8_t>(i)), 1, i, 64));
  }
  EXPECT_FALSE(q.hold(hop(250), 1, 1000, 64));
  EXPECT_TRUE(q.hold(hop(0), 1, 1001, 64)) << "a next hop already waiting still takes frames";
}

TEST(HoldQueue, ExpiresANextHopAfterTheTimeoutFromTheFirstCheckThatSawIt) {
  HoldQueue q;
  auto t0 = HoldQueue::Clock::time_point{} + std::chrono::hours(1);
  ASSERT_TRUE(q.hold(hop(2), 1, 0, 64));
  std::vector<std::uint64_t> dropped;
  std::vector<std::pair<NeighbourKey, std::uint32_t>> ran_out;
  auto drop = [&](const HoldQueue::Frame& f) { dropped.push_back(f.addr); };
  auto expired = [&](const NeighbourKey& k, std::uint32_t n) { ran_out.emplace_back(k, n); };
  EXPECT_EQ(q.expire(t0, drop, expired), 0u) << "starts the clock";
  ASSERT_TRUE(q.hold(hop(3), 1, 4096, 64));
  EXPECT_EQ(q.expire(t0 + std::chrono::milliseconds(500), drop, expired), 0u);
  ASSERT_TRUE(q.hold(hop(2), 1, 8192, 64));
  EXPECT_TRUE(ran_out.empty());
  EXPECT_EQ(q.expire(t0 + HoldQueue::kTimeout, drop, expired), 2u);
  EXPECT_EQ(dropped, (std::vector<std::uint64_t>{0, 8192}));
  ASSERT_EQ(ran_out.size(), 1u) << "one report per next hop, with all its frames";
  EXPECT_EQ(ran_out[0], std::make_pair(hop(2), 2u));
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.expire(t0 + std::chrono::milliseconds(500) + HoldQueue::kTimeout, drop, expired), 1u);
  ASSERT_EQ(ran_out.size(), 2u);
  EXPECT_EQ(ran_out[1], std::make_pair(hop(3), 1u));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.hops_waiting(), 0u);
  EXPECT_TRUE(q.hold(hop(2), 1, 0, 64)) << "the slots are free again";
}

TEST(HoldQueue, ANextHopHeldAgainAfterItRanOutGetsAClockOfItsOwn) {
  HoldQueue q;
  auto t0 = HoldQueue::Clock::time_point{} + std::chrono::hours(1);
  auto drop = [](const HoldQueue::Frame&) {};
  std::uint32_t reports = 0;
  auto expired = [&](const NeighbourKey&, std::uint32_t) { ++reports; };
  ASSERT_TRUE(q.hold(hop(1), 1, 0, 64));
  q.expire(t0, drop, expired);
  ASSERT_EQ(q.expire(t0 + HoldQueue::kTimeout, drop, expired), 1u);
  ASSERT_TRUE(q.hold(hop(1), 1, 4096, 64)) << "the next frame for it is held afresh";
  EXPECT_EQ(q.expire(t0 + HoldQueue::kTimeout + std::chrono::milliseconds(1), drop, expired), 0u);
  EXPECT_EQ(q.expire(t0 + 2 * HoldQueue::kTimeout, drop, expired), 0u)
      << "its clock started at the first check after it was held again";
  EXPECT_EQ(q.expire(t0 + 2 * HoldQueue::kTimeout + std::chrono::milliseconds(1), drop, expired),
            1u);
  EXPECT_EQ(reports, 2u);
}

TEST(HoldQueue, ClearHandsBackEveryFrame) {
  HoldQueue q;
  for (std::uint64_t i = 0; i < 10; ++i) ASSERT_TRUE(q.hold(hop(i % 3), 1, i, 64));
  std::uint32_t n = 0;
  EXPECT_EQ(q.clear([&](const HoldQueue::Frame&) { ++n; }), 10u);
  EXPECT_EQ(n, 10u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace ferry::fastpath
