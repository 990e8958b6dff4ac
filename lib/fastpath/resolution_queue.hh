// What a worker tells the control thread about next hops without a MAC: one it missed (the control
// thread has the kernel resolve it) and one whose held frames ran out of time (the control thread
// says why, and the next miss starts the resolution afresh). Single producer (the worker), single
// consumer (the control thread), fixed size, no allocation; a full queue loses a miss (the next
// miss asks again) or a timeout report (the worker counts its frames unclassified).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "lib/fastpath/neighbour_table.hh"

namespace ferry::fastpath {

enum class Queued : std::uint8_t { added, already_waiting, full };

struct HopReport {
  NeighbourKey key;
  std::uint32_t timed_out_frames = 0;  // 0: a miss; else a hold of this many frames ran out
  bool operator==(const HopReport&) const = default;
};

class ResolutionQueue {
 public:
  static constexpr std::uint32_t kEntries = 64;  // power of two

  // Worker side: a miss. A key already waiting as a miss is not queued twice (the scan is over at
  // most kEntries reports, and only on a neighbour miss, which holds the frame anyway).
  Queued push(const NeighbourKey& key) noexcept {
    std::uint32_t tail = tail_.load(std::memory_order_relaxed);
    std::uint32_t head = head_.load(std::memory_order_acquire);
    for (std::uint32_t i = head; i != tail; ++i) {
      const HopReport& r = entries_[i & (kEntries - 1)];
      if (r.timed_out_frames == 0 && r.key == key) return Queued::already_waiting;
    }
    return append(head, tail, HopReport{key, 0});
  }
  // Worker side: `frames` held for `key` ran out of time. Never merged with another report.
  Queued push_timeout(const NeighbourKey& key, std::uint32_t frames) noexcept {
    std::uint32_t tail = tail_.load(std::memory_order_relaxed);
    std::uint32_t head = head_.load(std::memory_order_acquire);
    return append(head, tail, HopReport{key, frames});
  }

  // Control-thread side.
  std::optional<HopReport> pop() noexcept {
    std::uint32_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return std::nullopt;
    HopReport report = entries_[head & (kEntries - 1)];
    head_.store(head + 1, std::memory_order_release);
    return report;
  }

 private:
  Queued append(std::uint32_t head, std::uint32_t tail, const HopReport& report) noexcept {
    if (tail - head == kEntries) return Queued::full;
    entries_[tail & (kEntries - 1)] = report;
    tail_.store(tail + 1, std::memory_order_release);
    return Queued::added;
  }

  std::array<HopReport, kEntries> entries_{};
  alignas(64) std::atomic<std::uint32_t> tail_{0};  // written by the worker
  alignas(64) std::atomic<std::uint32_t> head_{0};  // written by the control thread
};

}  // namespace ferry::fastpath
