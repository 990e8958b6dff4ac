// Next hops a worker found no MAC for, on their way to the control thread, which asks the kernel
// to resolve them. Single producer (the worker), single consumer (the control thread), fixed
// size, no allocation; a full queue loses the request, and the next miss asks again.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "lib/fastpath/neighbour_table.hh"

namespace ferry::fastpath {

enum class Queued : std::uint8_t { added, already_waiting, full };

class ResolutionQueue {
 public:
  static constexpr std::uint32_t kEntries = 64;  // power of two

  // Worker side. A key already waiting is not queued twice (the scan is over at most kEntries
  // keys, and only on a neighbour miss, which drops the frame anyway).
  Queued push(const NeighbourKey& key) noexcept {
    std::uint32_t tail = tail_.load(std::memory_order_relaxed);
    std::uint32_t head = head_.load(std::memory_order_acquire);
    for (std::uint32_t i = head; i != tail; ++i) {
      if (entries_[i & (kEntries - 1)] == key) return Queued::already_waiting;
    }
    if (tail - head == kEntries) return Queued::full;
    entries_[tail & (kEntries - 1)] = key;
    tail_.store(tail + 1, std::memory_order_release);
    return Queued::added;
  }

  // Control-thread side.
  std::optional<NeighbourKey> pop() noexcept {
    std::uint32_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return std::nullopt;
    NeighbourKey key = entries_[head & (kEntries - 1)];
    head_.store(head + 1, std::memory_order_release);
    return key;
  }

 private:
  std::array<NeighbourKey, kEntries> entries_{};
  alignas(64) std::atomic<std::uint32_t> tail_{0};  // written by the worker
  alignas(64) std::atomic<std::uint32_t> head_{0};  // written by the control thread
};

}  // namespace ferry::fastpath
