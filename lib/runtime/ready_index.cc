// The ready-worker index (see ready_index.hh).
#include "lib/runtime/ready_index.hh"

namespace ferry::runtime {

ReadyIndex::ReadyIndex(std::uint32_t workers) {
  // The listed flags bound the entries to one per worker; twice that leaves room for a cell a
  // dequeuer has claimed but not yet handed back, so an enqueue never finds the ring full.
  std::uint64_t capacity = 2;
  while (capacity < 2 * static_cast<std::uint64_t>(workers)) capacity <<= 1;
  mask_ = capacity - 1;
  cells_ = std::make_unique<Cell[]>(capacity);
  for (std::uint64_t i = 0; i < capacity; ++i)
    cells_[i].sequence.store(i, std::memory_order_relaxed);
  listed_ = std::make_unique<Flag[]>(workers);
}

bool ReadyIndex::list(std::uint32_t worker) {
  if (listed_[worker].value.exchange(true, std::memory_order_seq_cst)) return false;
  if (!enqueue(worker)) {
    listed_[worker].value.store(false, std::memory_order_seq_cst);  // cannot happen; stay honest
    return false;
  }
  return true;
}

std::optional<std::uint32_t> ReadyIndex::pop() {
  std::optional<std::uint32_t> worker = dequeue();
  if (worker) listed_[*worker].value.store(false, std::memory_order_seq_cst);
  return worker;
}

bool ReadyIndex::empty() const {
  return enqueue_pos_.load(std::memory_order_seq_cst) ==
         dequeue_pos_.load(std::memory_order_seq_cst);
}

bool ReadyIndex::enqueue(std::uint32_t worker) {
  std::uint64_t pos = enqueue_pos_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const std::uint64_t seq = cell.sequence.load(std::memory_order_acquire);
    const auto diff = static_cast<std::int64_t>(seq - pos);
    if (diff == 0) {
      if (enqueue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst)) {
        cell.worker = worker;
        cell.sequence.store(pos + 1, std::memory_order_release);
        return true;
      }
    } else if (diff < 0) {
      return false;  // full
    } else {
      pos = enqueue_pos_.load(std::memory_order_relaxed);
    }
  }
}

std::optional<std::uint32_t> ReadyIndex::dequeue() {
  std::uint64_t pos = dequeue_pos_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & mask_];
    const std::uint64_t seq = cell.sequence.load(std::memory_order_acquire);
    const auto diff = static_cast<std::int64_t>(seq - (pos + 1));
    if (diff == 0) {
      if (dequeue_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_seq_cst)) {
        const std::uint32_t worker = cell.worker;
        cell.sequence.store(pos + mask_ + 1, std::memory_order_release);
        return worker;
      }
    } else if (diff < 0) {
      return std::nullopt;  // empty
    } else {
      pos = dequeue_pos_.load(std::memory_order_relaxed);
    }
  }
}

}  // namespace ferry::runtime
