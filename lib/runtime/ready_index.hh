// The ready-worker index of io_ready=index: ids of workers whose I/O inbox went from empty to
// non-empty, so searchers pop a likely victim instead of scanning every inbox. Advisory: an id may
// be stale (its inbox already drained); a per-worker `listed` flag keeps each id in at most once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>

namespace ferry::runtime {

class ReadyIndex {
 public:
  explicit ReadyIndex(std::uint32_t workers);

  // Adds `worker` unless it is listed already. True when it added an entry.
  bool list(std::uint32_t worker);
  // Takes the oldest id and clears its listed flag (before the caller looks at that inbox, so a
  // push racing with the look lists the worker again). Empty when the index is.
  std::optional<std::uint32_t> pop();

  bool listed(std::uint32_t worker) const {
    return listed_[worker].value.load(std::memory_order_seq_cst);
  }
  bool empty() const;

 private:
  // Dmitry Vyukov's bounded MPMC queue: each cell's sequence number says whose turn it is.
  struct Cell {
    std::atomic<std::uint64_t> sequence;
    std::uint32_t worker = 0;
  };
  struct alignas(64) Flag {
    std::atomic<bool> value{false};
  };

  bool enqueue(std::uint32_t worker);
  std::optional<std::uint32_t> dequeue();

  std::uint64_t mask_;
  std::unique_ptr<Cell[]> cells_;
  std::unique_ptr<Flag[]> listed_;
  alignas(64) std::atomic<std::uint64_t> enqueue_pos_{0};
  alignas(64) std::atomic<std::uint64_t> dequeue_pos_{0};
};

}  // namespace ferry::runtime
