// RCU-style publication and reclamation of the workers' snapshots.
#include "lib/fastpath/snapshot_board.hh"

#include <algorithm>
#include <stdexcept>

namespace ferry::fastpath {

SnapshotBoard::SnapshotBoard(std::unique_ptr<const Snapshot> initial, std::size_t readers)
    : current_(initial.get()),
      owned_current_(std::move(initial)),
      seen_(std::make_unique<SeenSlot[]>(readers)),
      readers_(readers) {
  if (!owned_current_) throw std::invalid_argument("SnapshotBoard needs an initial snapshot");
}

SnapshotBoard::~SnapshotBoard() = default;

SnapshotBoard::Reader SnapshotBoard::reader(std::size_t index) {
  if (index >= readers_) throw std::out_of_range("snapshot reader index");
  return Reader(this, &seen_[index]);
}

void SnapshotBoard::publish(std::unique_ptr<const Snapshot> next) {
  if (!next) throw std::invalid_argument("publishing a null snapshot");
  // Pointer first, then the generation (release): a reader that sees the new generation is
  // guaranteed to load this pointer or a newer one.
  current_.store(next.get(), std::memory_order_release);
  std::uint64_t g = generation_.load(std::memory_order_relaxed) + 1;
  generation_.store(g, std::memory_order_release);
  retired_.push_back({g, std::move(owned_current_)});
  owned_current_ = std::move(next);
  reclaim();
}

std::size_t SnapshotBoard::reclaim() {
  std::uint64_t oldest = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t i = 0; i < readers_; ++i) {
    oldest = std::min(oldest, seen_[i].generation.load(std::memory_order_acquire));
  }
  std::erase_if(retired_, [oldest](const Retired& r) { return oldest >= r.free_after; });
  return retired_.size();
}

std::uint64_t SnapshotBoard::seen(std::size_t index) const {
  return seen_[index].generation.load(std::memory_order_relaxed);
}

}  // namespace ferry::fastpath
