// RCU-style publication of the workers' Snapshot: the control thread publishes a new one with an
// atomic pointer store and a generation bump; each worker looks at the generation once per loop
// turn and says which generation it has moved to; an old snapshot is freed only when every
// worker has moved past it. No lock or reference count on the worker's side.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "lib/fastpath/snapshot.hh"

namespace ferry::fastpath {

class SnapshotBoard {
 public:
  // One slot per reader (worker), fixed for the board's life.
  SnapshotBoard(std::unique_ptr<const Snapshot> initial, std::size_t readers);
  ~SnapshotBoard();
  SnapshotBoard(const SnapshotBoard&) = delete;
  SnapshotBoard& operator=(const SnapshotBoard&) = delete;

  class Reader;
  Reader reader(std::size_t index);

  // Control thread: makes `next` current; the previous one waits in the retired list.
  void publish(std::unique_ptr<const Snapshot> next);
  // Control thread: frees retired snapshots no reader can still be using; returns how many are
  // still waiting.
  std::size_t reclaim();
  // The current snapshot, for the control thread (which is the only publisher).
  const Snapshot& current() const { return *current_.load(std::memory_order_relaxed); }
  std::uint64_t generation() const { return generation_.load(std::memory_order_relaxed); }
  // The generation reader `index` last moved to (max() once it has parked).
  std::uint64_t seen(std::size_t index) const;
  std::size_t retired() const { return retired_.size(); }

 private:
  struct alignas(64) SeenSlot {
    std::atomic<std::uint64_t> generation{0};
  };
  struct Retired {
    std::uint64_t free_after;  // free once every reader has seen this generation
    std::unique_ptr<const Snapshot> snapshot;
  };

  std::atomic<const Snapshot*> current_;
  alignas(64) std::atomic<std::uint64_t> generation_{1};
  std::unique_ptr<const Snapshot> owned_current_;
  std::unique_ptr<SeenSlot[]> seen_;
  std::size_t readers_;
  std::vector<Retired> retired_;
};

// A worker's view. current() is the one call per loop turn: a relaxed-cost acquire load of the
// generation, and only on a change the pointer load and the store of the seen generation. The
// reference stays valid until the next current() or park().
class SnapshotBoard::Reader {
 public:
  Reader() = default;
  const Snapshot& current() noexcept {
    std::uint64_t g = board_->generation_.load(std::memory_order_acquire);
    if (g != seen_) {
      snapshot_ = board_->current_.load(std::memory_order_acquire);
      seen_ = g;
      slot_->generation.store(g, std::memory_order_release);
    }
    return *snapshot_;
  }
  std::uint64_t generation() const { return seen_; }
  // The worker is done with snapshots for good (thread exit): never wait for it again.
  void park() noexcept {
    slot_->generation.store(std::numeric_limits<std::uint64_t>::max(), std::memory_order_release);
  }

 private:
  friend class SnapshotBoard;
  Reader(SnapshotBoard* board, SeenSlot* slot) : board_(board), slot_(slot) {}
  SnapshotBoard* board_ = nullptr;
  SeenSlot* slot_ = nullptr;
  const Snapshot* snapshot_ = nullptr;
  std::uint64_t seen_ = 0;
};

}  // namespace ferry::fastpath
