// The frame-conservation invariant holds after every step of randomized worker and kernel
// operations over simulated queues sharing one slab.
#include "lib/xsk/frame_account.hh"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "lib/xsk/recycle.hh"
#include "tests/unit/xsk/sim_queue.hh"

namespace ferry::xsk {
namespace {

constexpr std::uint32_t kFrameBytes = 2048;

TEST(FrameAccount, FreshSlabIsAllOnTheFreeStack) {
  std::vector<std::byte> umem(16 * kFrameBytes);
  UmemSlab slab(umem, kFrameBytes, 0, 16);
  test::SimQueue q(8, 8, 8, 8, kFrameBytes, 256);
  QueueRings rings = q.rings();
  FrameAccount a = account_frames(slab, {&rings, 1}, 0);
  EXPECT_EQ(a.slab_frames, 16u);
  EXPECT_EQ(a.free_stack, 16u);
  EXPECT_EQ(a.fill + a.rx + a.tx + a.completion + a.in_hands, 0u);
  EXPECT_TRUE(a.balanced());
}

TEST(FrameAccount, EachTermFollowsTheFramesThroughTheRings) {
  std::vector<std::byte> umem(16 * kFrameBytes);
  UmemSlab slab(umem, kFrameBytes, 0, 16);
  test::SimQueue q(8, 8, 8, 8, kFrameBytes, 256);
  QueueRings r = q.rings();
  auto account = [&](std::uint64_t hands) { return account_frames(slab, {&r, 1}, hands); };

  ASSERT_EQ(refill(r.fill, slab, 8), 8u);
  EXPECT_EQ(account(0).fill, 8u);
  q.take_fill(5, false);  // the kernel holds 5, consumer word not yet published
  EXPECT_EQ(account(0).fill, 8u);
  ASSERT_EQ(q.deliver_rx(3, 60), 3u);
  FrameAccount a = account(0);
  EXPECT_EQ(a.fill, 5u);
  EXPECT_EQ(a.rx, 3u);
  EXPECT_TRUE(a.balanced());

  std::vector<xdp_desc> got(8);
  ASSERT_EQ(r.rx.pop(got), 3u);
  a = account(3);
  EXPECT_EQ(a.rx, 0u);
  EXPECT_EQ(a.in_hands, 3u);
  EXPECT_TRUE(a.balanced());

  ASSERT_EQ(r.tx.push(std::span(got).first(3)), 3u);
  EXPECT_EQ(account(0).tx, 3u);
  ASSERT_EQ(q.transmit(2), 2u);
  a = account(0);
  EXPECT_EQ(a.tx, 1u);
  EXPECT_EQ(a.completion, 2u);
  EXPECT_TRUE(a.balanced());

  RecycleResult rec = recycle_completions(r.completion, r.fill, slab);
  EXPECT_EQ(rec.to_fill + rec.to_slab, 2u);
  a = account(0);
  EXPECT_EQ(a.completion, 0u);
  EXPECT_TRUE(a.balanced()) << a.accounted();
}

// Two queues (two interfaces' queue q) carrying one slab's frames; a worker that receives on
// either, transmits on either, drops some, recycles; a kernel that takes, holds, delivers and
// completes in random amounts with lazy consumer publication. Checked after every step.
TEST(FrameAccount, InvariantHoldsAfterEveryRandomizedOperation) {
  constexpr std::uint32_t kFrames = 96;
  std::vector<std::byte> umem(2 * kFrames * kFrameBytes);
  UmemSlab slab(umem, kFrameBytes, kFrames, kFrames);  // the second slab of the UMEM
  std::unique_ptr<test::SimQueue> sims[] = {
      std::make_unique<test::SimQueue>(32, 16, 32, 16, kFrameBytes, 256, 0xfffffff0u),
      std::make_unique<test::SimQueue>(16, 32, 16, 32, kFrameBytes, 256, 7)};
  std::vector<QueueRings> rings = {sims[0]->rings(), sims[1]->rings()};
  std::vector<std::uint64_t> hands;  // frames the worker holds outside rings and free stack
  std::mt19937 rng(1234);
  std::uint64_t delivered = 0, transmitted = 0, recycled = 0, dropped = 0;

  for (int step = 0; step < 200000; ++step) {
    std::uint32_t qi = rng() & 1;
    test::SimQueue& sim = *sims[qi];
    QueueRings& r = rings[qi];
    std::uint32_t n = rng() % 24 + 1;
    switch (rng() % 8) {
      case 0:
        refill(r.fill, slab, n);
        break;
      case 1:
        sim.take_fill(n, rng() % 3 == 0);
        break;
      case 2:
        delivered += sim.deliver_rx(n, 64 + rng() % 1400);
        break;
      case 3: {
        std::vector<xdp_desc> got(n);
        std::uint32_t k = r.rx.pop(got);
        for (std::uint32_t i = 0; i < k; ++i) {
          ASSERT_NE(slab.packet(got[i].addr, got[i].len), nullptr);
          hands.push_back(got[i].addr);
        }
        break;
      }
      case 4: {  // transmit some of what we hold, on either queue
        std::vector<xdp_desc> out;
        while (!hands.empty() && out.size() < n) {
          out.push_back(xdp_desc{hands.back(), 60, 0});
          hands.pop_back();
        }
        std::uint32_t k = r.tx.push(out);
        for (std::uint32_t i = k; i < out.size(); ++i) hands.push_back(out[i].addr);
        break;
      }
      case 5:
        transmitted += sim.transmit(n);
        break;
      case 6: {
        RecycleResult rec = recycle_completions(r.completion, r.fill, slab, n);
        ASSERT_EQ(rec.rejected, 0u);
        recycled += rec.to_fill + rec.to_slab;
        break;
      }
      case 7: {  // drop: straight back to the free stack
        std::uint32_t k = std::min<std::uint32_t>(n, hands.size());
        SlabFreeResult f = slab.free(std::span(hands).last(k));
        ASSERT_EQ(f.freed, k);
        hands.resize(hands.size() - k);
        dropped += k;
        break;
      }
    }
    if (rng() % 5 == 0) sim.publish_fill();
    FrameAccount a = account_frames(slab, rings, hands.size());
    ASSERT_TRUE(a.balanced()) << "step " << step << ": free " << a.free_stack << " fill " << a.fill
                              << " rx " << a.rx << " hands " << a.in_hands << " tx " << a.tx
                              << " completion " << a.completion;
  }
  EXPECT_GT(delivered, 10000u);
  EXPECT_GT(transmitted, 5000u);
  EXPECT_GT(recycled, 5000u);
  EXPECT_GT(dropped, 1000u);
}

}  // namespace
}  // namespace ferry::xsk
