// A worker's local run queue with batch stealing (see local_queue.hh).
#include "lib/runtime/local_queue.hh"

namespace ferry::runtime {

bool LocalQueue::push(TaskHeader* task) {
  const std::uint32_t tail = tail_.load(std::memory_order_relaxed);
  const std::uint32_t steal = steal_of(head_.load(std::memory_order_acquire));
  // A thief still copying owns the slots from `steal` on: the ring is full up to there.
  if (tail - steal >= kCapacity) return false;
  slots_[tail & kMask].store(task, std::memory_order_relaxed);
  // seq_cst, not just release: the pusher reads the idle state next to decide on a wake, and a
  // parking searcher reads this queue after publishing that it parks (a Dekker pair).
  tail_.store(tail + 1, std::memory_order_seq_cst);
  return true;
}

TaskHeader* LocalQueue::pop() {
  std::uint64_t head = head_.load(std::memory_order_acquire);
  for (;;) {
    const std::uint32_t steal = steal_of(head);
    const std::uint32_t real = real_of(head);
    const std::uint32_t tail = tail_.load(std::memory_order_relaxed);
    if (real == tail) return nullptr;
    const std::uint32_t next_real = real + 1;
    // With no steal in progress both halves move together.
    const std::uint64_t next = steal == real ? pack(next_real, next_real) : pack(steal, next_real);
    if (head_.compare_exchange_weak(head, next, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      return slots_[real & kMask].load(std::memory_order_relaxed);
    }
  }
}

TaskHeader* LocalQueue::steal_into(LocalQueue& dst, std::uint32_t& moved) {
  moved = 0;
  const std::uint32_t dst_tail = dst.tail_.load(std::memory_order_relaxed);
  const std::uint32_t dst_steal = steal_of(dst.head_.load(std::memory_order_acquire));
  if (dst_tail - dst_steal > kCapacity / 2) return nullptr;  // no room for half a ring
  std::uint32_t n = steal_into2(dst, dst_tail);
  if (n == 0) return nullptr;
  moved = n;
  --n;  // the last one is returned to run now instead of being published in dst
  TaskHeader* task = dst.slots_[(dst_tail + n) & kMask].load(std::memory_order_relaxed);
  if (n > 0) dst.tail_.store(dst_tail + n, std::memory_order_release);
  return task;
}

std::uint32_t LocalQueue::steal_into2(LocalQueue& dst, std::uint32_t dst_tail) {
  std::uint64_t prev = head_.load(std::memory_order_acquire);
  std::uint64_t next = 0;
  std::uint32_t n = 0;
  for (;;) {
    const std::uint32_t src_steal = steal_of(prev);
    const std::uint32_t src_real = real_of(prev);
    const std::uint32_t src_tail = tail_.load(std::memory_order_acquire);
    if (src_steal != src_real) return 0;  // another thief is copying from this queue
    n = src_tail - src_real;
    n -= n / 2;
    if (n == 0) return 0;
    // Claim [src_real, src_real + n): the owner's pops continue above it, pushes stop at `steal`.
    next = pack(src_steal, src_real + n);
    if (head_.compare_exchange_weak(prev, next, std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      break;
    }
  }
  const std::uint32_t first = steal_of(next);
  for (std::uint32_t i = 0; i < n; ++i) {
    TaskHeader* task = slots_[(first + i) & kMask].load(std::memory_order_relaxed);
    dst.slots_[(dst_tail + i) & kMask].store(task, std::memory_order_relaxed);
  }
  // Release the claimed slots to the owner: steal catches up with real (which the owner's pops
  // may have moved meanwhile).
  prev = next;
  for (;;) {
    const std::uint32_t real = real_of(prev);
    if (head_.compare_exchange_weak(prev, pack(real, real), std::memory_order_acq_rel,
                                    std::memory_order_acquire)) {
      return n;
    }
  }
}

std::uint32_t LocalQueue::len() const {
  const std::uint32_t real = real_of(head_.load(std::memory_order_seq_cst));
  const std::uint32_t tail = tail_.load(std::memory_order_seq_cst);
  return tail - real;
}

}  // namespace ferry::runtime
