// The worker -> control thread queue of next hops to resolve and holds that ran out.
#include "lib/fastpath/resolution_queue.hh"

#include <gtest/gtest.h>

#include <thread>

namespace ferry::fastpath {
namespace {

NeighbourKey key(std::uint32_t n) {
  NeighbourKey k;
  k.port = n % 3;
  k.address[0] = 10;
  k.address[2] = static_cast<std::uint8_t>(n >> 8);
  k.address[3] = static_cast<std::uint8_t>(n);
  return k;
}

HopReport miss(std::uint32_t n) {
  return {key(n), 0};
}

TEST(ResolutionQueue, KeyWaitingIsNotQueuedTwice) {
  ResolutionQueue q;
  EXPECT_EQ(q.push(key(1)), Queued::added);
  EXPECT_EQ(q.push(key(1)), Queued::already_waiting);
  EXPECT_EQ(q.push(key(2)), Queued::added);
  EXPECT_EQ(q.pop(), miss(1));
  EXPECT_EQ(q.push(key(1)), Queued::added) << "asked for again once taken";
  EXPECT_EQ(q.pop(), miss(2));
  EXPECT_EQ(q.pop(), miss(1));
  EXPECT_FALSE(q.pop().has_value());
}

TEST(ResolutionQueue, TimeoutsAreReportedEachTimeAndInOrderWithMisses) {
  ResolutionQueue q;
  EXPECT_EQ(q.push(key(1)), Queued::added);
  EXPECT_EQ(q.push_timeout(key(1), 40), Queued::added) << "a timeout is never merged with a miss";
  EXPECT_EQ(q.push_timeout(key(1), 2), Queued::added) << "nor with another timeout";
  EXPECT_EQ(q.push(key(1)), Queued::already_waiting) << "the miss still waits";
  EXPECT_EQ(q.pop(), miss(1));
  EXPECT_EQ(q.push(key(1)), Queued::added)
      << "a timeout waiting does not stand for a miss: the next miss after it is reported";
  EXPECT_EQ(q.pop(), (HopReport{key(1), 40}));
  EXPECT_EQ(q.pop(), (HopReport{key(1), 2}));
  EXPECT_EQ(q.pop(), miss(1)) << "after the timeouts, so the control thread sees them first";
  EXPECT_FALSE(q.pop().has_value());
}

TEST(ResolutionQueue, AFullQueueRefusesATimeoutReport) {
  ResolutionQueue q;
  for (std::uint32_t i = 0; i < ResolutionQueue::kEntries; ++i)
    ASSERT_EQ(q.push(key(i)), Queued::added);
  EXPECT_EQ(q.push_timeout(key(0), 7), Queued::full);
  ASSERT_TRUE(q.pop().has_value());
  EXPECT_EQ(q.push_timeout(key(0), 7), Queued::added);
}

TEST(ResolutionQueue, FullQueueRefusesAndRecoversAfterDraining) {
  ResolutionQueue q;
  for (std::uint32_t i = 0; i < ResolutionQueue::kEntries; ++i) {
    ASSERT_EQ(q.push(key(i)), Queued::added);
  }
  EXPECT_EQ(q.push(key(1000)), Queued::full);
  for (std::uint32_t i = 0; i < ResolutionQueue::kEntries; ++i) EXPECT_EQ(q.pop(), miss(i));
  EXPECT_EQ(q.push(key(1000)), Queued::added);
}

TEST(ResolutionQueue, ProducerAndConsumerThreadsPassEveryKeyInOrder) {
  ResolutionQueue q;
  constexpr std::uint32_t kKeys = 20000;
  std::thread producer([&] {
    for (std::uint32_t i = 0; i < kKeys;) {
      if (q.push(key(i)) == Queued::full) {
        std::this_thread::yield();
      } else {
        ++i;
      }
    }
  });
  std::vector<NeighbourKey> got;
  while (got.size() < kKeys) {
    if (auto r = q.pop()) {
      got.push_back(r->key);
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  for (std::uint32_t i = 0; i < kKeys; ++i) ASSERT_EQ(got[i], key(i)) << i;
  EXPECT_FALSE(q.pop().has_value());
}

}  // namespace
}  // namespace ferry::fastpath
