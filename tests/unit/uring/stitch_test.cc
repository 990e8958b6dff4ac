// The stitching helper: adjacent spans are used in place, others copied and counted.
#include "lib/uring/stitch.hh"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <vector>

namespace ferry::uring {
namespace {

TEST(Stitch, CountsContiguousRuns) {
  std::array<std::byte, 64> mem{};
  std::vector<iovec> spans = {{&mem[0], 8}, {&mem[8], 8}, {&mem[32], 4}, {&mem[36], 4}};
  EXPECT_EQ(contiguous_runs(spans), 2u);
  spans.push_back({&mem[0], 1});
  EXPECT_EQ(contiguous_runs(spans), 3u);
  EXPECT_EQ(contiguous_runs({}), 0u);
}

TEST(Stitch, AdjacentSpansAreUsedInPlaceWithoutCounting) {
  std::array<std::byte, 64> mem{};
  std::vector<iovec> spans = {{&mem[4], 10}, {&mem[14], 20}};
  std::array<std::byte, 64> scratch{};
  metrics::Counter stitched;
  auto view = contiguous(spans, scratch, stitched);
  EXPECT_EQ(view.data(), &mem[4]);
  EXPECT_EQ(view.size(), 30u);
  EXPECT_EQ(stitched.value(), 0u);
}

TEST(Stitch, SeparateSpansAreCopiedInOrderAndCounted) {
  std::array<char, 32> mem{"hello ...world"};
  std::vector<iovec> spans = {{&mem[0], 6}, {&mem[9], 5}};
  std::array<std::byte, 32> scratch{};
  metrics::Counter stitched;
  auto view = contiguous(spans, scratch, stitched);
  ASSERT_EQ(view.size(), 11u);
  EXPECT_EQ(view.data(), scratch.data());
  EXPECT_EQ(std::memcmp(view.data(), "hello world", 11), 0);
  EXPECT_EQ(stitched.value(), 11u);
}

TEST(Stitch, RefusesWhenScratchIsTooSmall) {
  std::array<char, 32> mem{};
  std::vector<iovec> spans = {{&mem[0], 8}, {&mem[16], 8}};
  std::array<std::byte, 10> scratch{};
  metrics::Counter stitched;
  EXPECT_TRUE(contiguous(spans, scratch, stitched).empty());
  EXPECT_EQ(stitched.value(), 0u);
}

}  // namespace
}  // namespace ferry::uring
