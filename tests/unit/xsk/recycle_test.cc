// recycle_completions and refill over user-space rings: ring to ring, surplus to the slab.
#include "lib/xsk/recycle.hh"

#include <gtest/gtest.h>

#include <vector>

#include "lib/xsk/user_ring.hh"

namespace ferry::xsk {
namespace {

constexpr std::uint32_t kFrameBytes = 2048;

struct Rings {
  UserRing<std::uint64_t> completion_mem{16};
  UserRing<std::uint64_t> fill_mem{8};
  CompletionRing completion{completion_mem.consumer()};
  FillRing fill{fill_mem.producer()};
  ProducerRing<std::uint64_t> kernel_completion{completion_mem.producer()};
  ConsumerRing<std::uint64_t> kernel_fill{fill_mem.consumer()};
};

class RecycleTest : public ::testing::Test {
 protected:
  std::vector<std::byte> umem_ = std::vector<std::byte>(32 * kFrameBytes);
  UmemSlab slab_{umem_, kFrameBytes, 0, 32};
  Rings r_;

  // Takes `n` frames from the slab and has the "kernel" complete them, with a tx offset.
  std::vector<std::uint64_t> complete(std::uint32_t n, std::uint64_t offset) {
    std::vector<std::uint64_t> frames(n);
    EXPECT_EQ(slab_.alloc(frames), n);
    std::vector<std::uint64_t> done = frames;
    for (auto& a : done) a += offset;
    EXPECT_EQ(r_.kernel_completion.push(done), n);
    return done;
  }
};

TEST_F(RecycleTest, CompletionsGoStraightToTheFillRing) {
  std::vector<std::uint64_t> done = complete(6, 0);
  RecycleResult r = recycle_completions(r_.completion, r_.fill, slab_);
  EXPECT_EQ(r.to_fill, 6u);
  EXPECT_EQ(r.to_slab, 0u);
  EXPECT_EQ(r.rejected, 0u);
  EXPECT_EQ(slab_.free_count(), 26u);
  std::vector<std::uint64_t> filled(8);
  ASSERT_EQ(r_.kernel_fill.pop(filled), 6u);
  filled.resize(6);
  EXPECT_EQ(filled, done);
  EXPECT_EQ(r_.completion.producer_word(), r_.completion.consumer_word());
}

TEST_F(RecycleTest, SurplusTheFillRingCannotTakeSpillsIntoTheSlab) {
  std::vector<std::uint64_t> parked(3);
  ASSERT_EQ(slab_.alloc(parked), 3u);
  ASSERT_EQ(r_.fill.push(parked), 3u);  // fill has 5 free slots of 8
  std::vector<std::uint64_t> done = complete(12, 256 + 14);
  RecycleResult r = recycle_completions(r_.completion, r_.fill, slab_);
  EXPECT_EQ(r.to_fill, 5u);
  EXPECT_EQ(r.to_slab, 7u);
  EXPECT_EQ(r.rejected, 0u);
  EXPECT_EQ(slab_.free_count(), 32u - 3 - 12 + 7);
  // The first five completions went to the fill ring as they were; the other seven are free
  // frames again, normalised to their base.
  std::vector<std::uint64_t> filled(8);
  ASSERT_EQ(r_.kernel_fill.pop(filled), 8u);
  for (std::uint32_t i = 0; i < 5; ++i) EXPECT_EQ(filled[3 + i], done[i]);
  for (std::uint32_t i = 5; i < 12; ++i) EXPECT_TRUE(slab_.is_free(done[i])) << i;
}

TEST_F(RecycleTest, ResultCountsRejectedForeignFramesInTheSurplus) {
  std::vector<std::uint64_t> parked(8);
  ASSERT_EQ(slab_.alloc(parked), 8u);
  ASSERT_EQ(r_.fill.push(parked), 8u);  // fill full: everything spills
  std::uint64_t foreign[] = {1000u * kFrameBytes, 5u * kFrameBytes /* still free */};
  ASSERT_EQ(r_.kernel_completion.push(foreign), 2u);
  RecycleResult r = recycle_completions(r_.completion, r_.fill, slab_);
  EXPECT_EQ(r.to_fill, 0u);
  EXPECT_EQ(r.to_slab, 0u);
  EXPECT_EQ(r.rejected, 2u);
}

TEST_F(RecycleTest, HarvestsAtMostMaxFramesAndWrapsBothRings) {
  std::uint32_t moved = 0;
  // Many rounds so that both rings' batches start at every offset and cross the wrap.
  for (int round = 0; round < 200; ++round) {
    std::uint32_t n = 1 + round % 7;
    std::vector<std::uint64_t> done = complete(n, 64);
    RecycleResult r = recycle_completions(r_.completion, r_.fill, slab_, 4);
    EXPECT_EQ(r.to_fill + r.to_slab, std::min<std::uint32_t>(n, 4));
    moved += r.to_fill;
    // The rest of this round's completions.
    RecycleResult rest = recycle_completions(r_.completion, r_.fill, slab_, 64);
    moved += rest.to_fill;
    std::vector<std::uint64_t> filled(8);
    std::uint32_t got = r_.kernel_fill.pop(filled);
    filled.resize(got);
    ASSERT_EQ(slab_.free(filled).freed, got);  // the kernel "uses" them; back to the slab
    ASSERT_EQ(slab_.free_count(), 32u) << "round " << round;
  }
  EXPECT_GT(moved, 500u);
}

TEST_F(RecycleTest, RefillPopsFramesIntoTheFillRingUpToItsRoom) {
  EXPECT_EQ(refill(r_.fill, slab_, 64), 8u);
  EXPECT_EQ(slab_.free_count(), 24u);
  EXPECT_EQ(refill(r_.fill, slab_, 64), 0u);
  std::vector<std::uint64_t> filled(8);
  ASSERT_EQ(r_.kernel_fill.pop(filled), 8u);
  for (std::uint64_t a : filled) EXPECT_FALSE(slab_.is_free(a));
  EXPECT_EQ(refill(r_.fill, slab_, 3), 3u);
}

TEST_F(RecycleTest, RefillStopsWhenTheSlabRunsDry) {
  std::vector<std::uint64_t> most(30);
  ASSERT_EQ(slab_.alloc(most), 30u);
  EXPECT_EQ(refill(r_.fill, slab_, 8), 2u);
  EXPECT_EQ(slab_.free_count(), 0u);
  EXPECT_EQ(refill(r_.fill, slab_, 8), 0u);
}

}  // namespace
}  // namespace ferry::xsk
