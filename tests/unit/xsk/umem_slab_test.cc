// UmemSlab: allocation, exhaustion, bounds, disjointness between slabs, double-free detection.
#include "lib/xsk/umem_slab.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace ferry::xsk {
namespace {

constexpr std::uint32_t kFrameBytes = 2048;

class UmemSlabTest : public ::testing::Test {
 protected:
  std::vector<std::byte> umem_ = std::vector<std::byte>(64 * kFrameBytes);
};

TEST_F(UmemSlabTest, HandsOutEveryFrameOnceThenRunsDry) {
  UmemSlab slab(umem_, kFrameBytes, 16, 16);
  std::vector<std::uint64_t> got(20);
  EXPECT_EQ(slab.alloc(got), 16u);
  got.resize(16);
  std::set<std::uint64_t> distinct(got.begin(), got.end());
  EXPECT_EQ(distinct.size(), 16u);
  for (std::uint64_t addr : got) {
    EXPECT_GE(addr, 16u * kFrameBytes);
    EXPECT_LT(addr, 32u * kFrameBytes);
    EXPECT_EQ(addr % kFrameBytes, 0u);
  }
  EXPECT_EQ(slab.free_count(), 0u);
  std::uint64_t more = 0;
  EXPECT_EQ(slab.alloc({&more, 1}), 0u);
}

TEST_F(UmemSlabTest, FreeIsLifoSoTheWarmestFrameIsReusedFirst) {
  UmemSlab slab(umem_, kFrameBytes, 0, 8);
  std::vector<std::uint64_t> got(8);
  ASSERT_EQ(slab.alloc(got), 8u);
  std::uint64_t last = got[5];
  ASSERT_EQ(slab.free({&last, 1}).freed, 1u);
  std::uint64_t again = 0;
  ASSERT_EQ(slab.alloc({&again, 1}), 1u);
  EXPECT_EQ(again, last);
}

TEST_F(UmemSlabTest, FreeNormalisesAddressesInsideAFrame) {
  UmemSlab slab(umem_, kFrameBytes, 4, 4);
  std::vector<std::uint64_t> got(4);
  ASSERT_EQ(slab.alloc(got), 4u);
  // rx descriptors point past the headroom: base + 256 + 14, say.
  std::uint64_t inside = got[2] + 270;
  SlabFreeResult r = slab.free({&inside, 1});
  EXPECT_EQ(r.freed, 1u);
  EXPECT_TRUE(slab.is_free(got[2]));
  std::uint64_t back = 0;
  ASSERT_EQ(slab.alloc({&back, 1}), 1u);
  EXPECT_EQ(back, got[2]);
}

TEST_F(UmemSlabTest, RejectsAddressesOutsideTheSlab) {
  UmemSlab slab(umem_, kFrameBytes, 8, 8);
  std::vector<std::uint64_t> foreign = {0, 8u * kFrameBytes - 1, 16u * kFrameBytes,
                                        63u * kFrameBytes, ~0ull};
  SlabFreeResult r = slab.free(foreign);
  EXPECT_EQ(r.freed, 0u);
  EXPECT_EQ(r.outside_slab, 5u);
  EXPECT_EQ(slab.free_count(), 8u);
}

TEST_F(UmemSlabTest, DoubleFreeIsCaughtAndTheFrameIsNeverHandedOutTwice) {
  UmemSlab slab(umem_, kFrameBytes, 0, 4);
  std::vector<std::uint64_t> got(4);
  ASSERT_EQ(slab.alloc(got), 4u);
  std::uint64_t twice[] = {got[1], got[1] + 64};
  SlabFreeResult r = slab.free(twice);
  EXPECT_EQ(r.freed, 1u);
  EXPECT_EQ(r.double_free, 1u);
  EXPECT_EQ(slab.free_count(), 1u);
  // A frame still on the free stack cannot be freed again either.
  EXPECT_EQ(slab.free({&got[1], 1}).double_free, 1u);
  std::vector<std::uint64_t> again(4);
  EXPECT_EQ(slab.alloc(again), 1u);
  EXPECT_EQ(again[0], got[1]);
}

TEST_F(UmemSlabTest, WithoutOwnershipCheckTheStackStillCannotOverflow) {
  UmemSlab slab(umem_, kFrameBytes, 0, 2, OwnershipCheck::off);
  std::uint64_t extra = 0;
  SlabFreeResult r = slab.free({&extra, 1});
  EXPECT_EQ(r.freed, 0u);
  EXPECT_EQ(r.double_free, 1u);
  EXPECT_EQ(slab.free_count(), 2u);
}

TEST_F(UmemSlabTest, SlabsOverOneUmemAreDisjoint) {
  std::vector<UmemSlab> slabs;
  for (std::uint32_t q = 0; q < 4; ++q) slabs.emplace_back(umem_, kFrameBytes, q * 16, 16);
  std::set<std::uint64_t> seen;
  for (std::uint32_t q = 0; q < 4; ++q) {
    std::vector<std::uint64_t> got(16);
    ASSERT_EQ(slabs[q].alloc(got), 16u);
    for (std::uint64_t addr : got) {
      EXPECT_TRUE(seen.insert(addr).second) << "frame " << addr << " in two slabs";
      for (std::uint32_t other = 0; other < 4; ++other) {
        EXPECT_EQ(slabs[other].contains(addr), other == q);
      }
    }
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST_F(UmemSlabTest, PacketAccessIsBoundsChecked) {
  UmemSlab slab(umem_, kFrameBytes, 2, 2);
  std::uint64_t base = 2u * kFrameBytes;
  EXPECT_EQ(slab.packet(base + 256, 1500), umem_.data() + base + 256);
  EXPECT_EQ(slab.packet(base, kFrameBytes), umem_.data() + base);
  EXPECT_EQ(slab.packet(base + 256, kFrameBytes - 256), umem_.data() + base + 256);
  EXPECT_EQ(slab.packet(base + 256, kFrameBytes - 255), nullptr);  // crosses into the next frame
  EXPECT_EQ(slab.packet(base - 1, 1), nullptr);                    // the slab before
  EXPECT_EQ(slab.packet(4u * kFrameBytes, 1), nullptr);            // the slab after
  EXPECT_EQ(slab.frame(base + 3000), umem_.data() + base + kFrameBytes);
  EXPECT_EQ(slab.frame(4u * kFrameBytes), nullptr);
}

TEST_F(UmemSlabTest, RejectsGeometryThatDoesNotFit) {
  EXPECT_THROW(UmemSlab(umem_, 3000, 0, 4), std::invalid_argument);
  EXPECT_THROW(UmemSlab(umem_, kFrameBytes, 60, 8), std::invalid_argument);
  EXPECT_THROW(UmemSlab(umem_, kFrameBytes, 0, 0), std::invalid_argument);
}

// A handover: the free stack becomes exactly what the previous ferryd's slab had free.
TEST_F(UmemSlabTest, RestoreFreeMakesTheFreeStackExactlyTheGivenFrames) {
  UmemSlab slab(umem_, kFrameBytes, 8, 16);
  const std::vector<std::uint64_t> handed = {12 * kFrameBytes, 9 * kFrameBytes, 23 * kFrameBytes,
                                             8 * kFrameBytes};
  slab.restore_free(handed);
  EXPECT_EQ(slab.free_count(), 4u);
  EXPECT_EQ(std::vector<std::uint64_t>(slab.free_frames().begin(), slab.free_frames().end()),
            handed)
      << "bottom first, in the order given";
  for (std::uint32_t f = 8; f < 24; ++f) {
    bool given = std::find(handed.begin(), handed.end(), f * kFrameBytes) != handed.end();
    EXPECT_EQ(slab.is_free(f * kFrameBytes), given) << "frame " << f;
  }

  // alloc() hands out only those, the top of the stack first, then runs dry.
  std::vector<std::uint64_t> got;
  std::uint64_t one = 0;
  while (slab.alloc({&one, 1}) == 1) got.push_back(one);
  EXPECT_EQ(got, (std::vector<std::uint64_t>{8 * kFrameBytes, 23 * kFrameBytes, 9 * kFrameBytes,
                                             12 * kFrameBytes}));
  EXPECT_EQ(slab.free_count(), 0u);
}

TEST_F(UmemSlabTest, AfterRestoreFreeTheFramesThatWereOutMayBeFreedAndTheFreeOnesNot) {
  UmemSlab slab(umem_, kFrameBytes, 8, 16);
  const std::vector<std::uint64_t> handed = {10 * kFrameBytes, 11 * kFrameBytes};
  slab.restore_free(handed);
  // Frame 15 was in a ring: it comes back (at any address inside it, as rx descriptors do).
  std::uint64_t out_frame = 15 * kFrameBytes + 256;
  SlabFreeResult back = slab.free({&out_frame, 1});
  EXPECT_EQ(back.freed, 1u);
  EXPECT_EQ(back.double_free, 0u);
  EXPECT_EQ(slab.free_count(), 3u);
  EXPECT_TRUE(slab.is_free(15 * kFrameBytes));
  // Frame 10 was handed over free: freeing it again is a double free, not a second copy.
  std::uint64_t free_frame = 10 * kFrameBytes;
  SlabFreeResult twice = slab.free({&free_frame, 1});
  EXPECT_EQ(twice.freed, 0u);
  EXPECT_EQ(twice.double_free, 1u);
  EXPECT_EQ(slab.free_count(), 3u);
}

TEST_F(UmemSlabTest, RestoreFreeOfEveryFrameOrNoneIsAccepted) {
  UmemSlab slab(umem_, kFrameBytes, 0, 4);
  std::vector<std::uint64_t> all = {0, kFrameBytes, 2 * kFrameBytes, 3 * kFrameBytes};
  slab.restore_free(all);
  EXPECT_EQ(slab.free_count(), 4u);
  slab.restore_free({});
  EXPECT_EQ(slab.free_count(), 0u);
  std::uint64_t one = 0;
  EXPECT_EQ(slab.alloc({&one, 1}), 0u);
  EXPECT_EQ(slab.free(all).freed, 4u) << "every frame was out";
}

TEST_F(UmemSlabTest, RestoreFreeRefusesAddressesThatAreNotFreeFramesOfThisSlabAndChangesNothing) {
  UmemSlab slab(umem_, kFrameBytes, 8, 4);  // frames 8..11
  std::vector<std::uint64_t> taken(1);
  ASSERT_EQ(slab.alloc(taken), 1u);  // three free, one out: a state a bad call must not touch
  const std::vector<std::uint64_t> before(slab.free_frames().begin(), slab.free_frames().end());
  const std::vector<std::vector<std::uint64_t>> refused = {
      {8 * kFrameBytes, 12 * kFrameBytes},                   // past the end
      {7 * kFrameBytes},                                     // before the start
      {9 * kFrameBytes + 64},                                // inside a frame, not its base
      {9 * kFrameBytes, 10 * kFrameBytes, 9 * kFrameBytes},  // given twice
      // more addresses than the slab has frames
      {8 * kFrameBytes, 9 * kFrameBytes, 10 * kFrameBytes, 11 * kFrameBytes, 8 * kFrameBytes},
  };
  for (const auto& addrs : refused) {
    SCOPED_TRACE(testing::Message() << addrs.size() << " addresses, first " << addrs.front());
    EXPECT_THROW(slab.restore_free(addrs), std::invalid_argument);
    EXPECT_EQ(slab.free_count(), 3u);
    EXPECT_EQ(std::vector<std::uint64_t>(slab.free_frames().begin(), slab.free_frames().end()),
              before);
    EXPECT_FALSE(slab.is_free(taken[0]));
    for (std::uint64_t addr : before) EXPECT_TRUE(slab.is_free(addr));
  }
}

}  // namespace
}  // namespace ferry::xsk
