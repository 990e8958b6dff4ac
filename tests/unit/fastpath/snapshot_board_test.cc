// RCU-style publication: readers see the newest snapshot at their next turn, and an old one is
// freed only when every reader has moved past it (or parked).
#include "lib/fastpath/snapshot_board.hh"

#include <gtest/gtest.h>

#include <thread>

namespace ferry::fastpath {
namespace {

std::unique_ptr<Snapshot> tagged(std::uint32_t tag) {
  auto s = std::make_unique<Snapshot>();
  s->port_count = tag;
  return s;
}

TEST(SnapshotBoard, ReaderSeesTheNewSnapshotAtItsNextTurn) {
  SnapshotBoard board(tagged(1), 1);
  auto reader = board.reader(0);
  EXPECT_EQ(reader.current().port_count, 1u);
  board.publish(tagged(2));
  EXPECT_EQ(reader.current().port_count, 2u);
  EXPECT_EQ(reader.generation(), 2u);
  EXPECT_EQ(board.generation(), 2u);
}

TEST(SnapshotBoard, OldSnapshotLivesUntilEveryReaderHasMovedOn) {
  SnapshotBoard board(tagged(1), 2);
  auto a = board.reader(0);
  auto b = board.reader(1);
  const Snapshot* first = &a.current();
  b.current();
  board.publish(tagged(2));
  EXPECT_EQ(board.retired(), 1u);
  a.current();
  EXPECT_EQ(board.reclaim(), 1u) << "b may still be reading the first snapshot";
  EXPECT_EQ(first->port_count, 1u);
  b.current();
  EXPECT_EQ(board.reclaim(), 0u);
}

TEST(SnapshotBoard, ReaderThatSkipsGenerationsReleasesAllOfThem) {
  SnapshotBoard board(tagged(1), 1);
  auto r = board.reader(0);
  r.current();
  for (std::uint32_t g = 2; g <= 5; ++g) board.publish(tagged(g));
  EXPECT_EQ(board.retired(), 4u);
  EXPECT_EQ(r.current().port_count, 5u);
  EXPECT_EQ(board.reclaim(), 0u);
}

TEST(SnapshotBoard, ParkedReaderNeverHoldsReclamationBack) {
  SnapshotBoard board(tagged(1), 2);
  auto active = board.reader(0);
  auto gone = board.reader(1);
  gone.park();
  active.current();
  board.publish(tagged(2));
  active.current();
  EXPECT_EQ(board.reclaim(), 0u);
}

// Under TSan this is the check that matters: a reader thread that keeps reading while the
// publisher swaps and reclaims never touches freed memory.
TEST(SnapshotBoard, ConcurrentReaderNeverSeesAFreedSnapshot) {
  SnapshotBoard board(tagged(0), 1);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> reads{0};
  std::thread reader_thread([&] {
    auto r = board.reader(0);
    std::uint32_t last = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      std::uint32_t tag = r.current().port_count;
      EXPECT_GE(tag, last) << "generations only move forward";
      last = tag;
      reads.fetch_add(1, std::memory_order_relaxed);
    }
    r.park();
  });
  for (std::uint32_t g = 1; g <= 2000; ++g) {
    board.publish(tagged(g));
    board.reclaim();
  }
  while (reads.load() < 1000) std::this_thread::yield();
  stop.store(true);
  reader_thread.join();
  EXPECT_EQ(board.reclaim(), 0u);
  EXPECT_EQ(board.current().port_count, 2000u);
}

}  // namespace
}  // namespace ferry::fastpath
