// A worker's local run queue: a fixed ring the owner pushes to and pops from without locks, and
// from which idle workers steal half at a time (the design of Tokio's multi-thread run queue).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "lib/runtime/task.hh"

namespace ferry::runtime {

class LocalQueue {
 public:
  static constexpr std::uint32_t kCapacity = 256;

  // Owner only. False when the ring is full; the caller puts the task elsewhere.
  bool push(TaskHeader* task);
  // Owner only: the oldest task, or null.
  TaskHeader* pop();

  // Called by a thief on its OWN queue `dst`: moves half of this queue's tasks (rounded up) into
  // `dst` and returns the last of them to run at once; `moved` is the number taken. Null when
  // there is nothing to take, another thief is mid-steal, or `dst` has no room for half a ring.
  TaskHeader* steal_into(LocalQueue& dst, std::uint32_t& moved);

  // Any thread; a snapshot.
  std::uint32_t len() const;
  bool empty() const { return len() == 0; }

 private:
  static constexpr std::uint32_t kMask = kCapacity - 1;
  static_assert((kCapacity & kMask) == 0, "capacity must be a power of two");

  // head packs two positions: `steal` (where an in-progress steal started) in the high half and
  // `real` (the next task to take) in the low half; they differ only while a thief copies.
  static std::uint64_t pack(std::uint32_t steal, std::uint32_t real) {
    return (static_cast<std::uint64_t>(steal) << 32) | real;
  }
  static std::uint32_t steal_of(std::uint64_t head) {
    return static_cast<std::uint32_t>(head >> 32);
  }
  static std::uint32_t real_of(std::uint64_t head) { return static_cast<std::uint32_t>(head); }

  std::uint32_t steal_into2(LocalQueue& dst, std::uint32_t dst_tail);

  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint32_t> tail_{0};  // written by the owner only
  // Slots are atomics only so that a thief's read and the owner's later reuse of a slot are
  // well-defined; head/tail carry the ordering, the slots themselves are relaxed.
  std::array<std::atomic<TaskHeader*>, kCapacity> slots_{};
};

}  // namespace ferry::runtime
