// Searching/parked accounting and the gated wake (see idle.hh).
#include "lib/runtime/idle.hh"

#include <algorithm>

namespace ferry::runtime {

Idle::Idle(std::uint32_t workers)
    : workers_(workers), state_(workers * kUnparkedOne), asleep_(workers, 0) {
  sleepers_.reserve(workers);
}

bool Idle::should_wake() const {
  // An RMW rather than a load: it orders the caller's preceding queue push before this read
  // (the other half of the pair with a parking searcher's final look at the queues).
  const std::uint64_t s = state_.fetch_add(0, std::memory_order_seq_cst);
  return searching_of(s) == 0 && unparked_of(s) < workers_;
}

bool Idle::transition_to_searching() {
  const std::uint64_t s = state_.load(std::memory_order_seq_cst);
  if (2 * searching_of(s) >= workers_) return false;
  state_.fetch_add(1, std::memory_order_seq_cst);
  return true;
}

bool Idle::transition_from_searching() {
  const std::uint64_t prev = state_.fetch_sub(1, std::memory_order_seq_cst);
  return searching_of(prev) == 1;
}

bool Idle::transition_to_parked(std::uint32_t worker, bool searching) {
  std::lock_guard lock(mutex_);
  const std::uint64_t dec = kUnparkedOne + (searching ? 1 : 0);
  const std::uint64_t prev = state_.fetch_sub(dec, std::memory_order_seq_cst);
  sleepers_.push_back(worker);
  asleep_[worker] = 1;
  return searching && searching_of(prev) == 1;
}

std::optional<std::uint32_t> Idle::worker_to_notify() {
  if (!should_wake()) return std::nullopt;
  std::lock_guard lock(mutex_);
  if (!should_wake() || sleepers_.empty()) return std::nullopt;
  // The woken worker counts as searching from now on, so further wakes wait until it finds work.
  state_.fetch_add(1 + kUnparkedOne, std::memory_order_seq_cst);
  const std::uint32_t worker = sleepers_.back();
  sleepers_.pop_back();
  asleep_[worker] = 0;
  return worker;
}

bool Idle::unpark_worker_by_id(std::uint32_t worker) {
  std::lock_guard lock(mutex_);
  if (!asleep_[worker]) return false;
  auto it = std::find(sleepers_.begin(), sleepers_.end(), worker);
  sleepers_.erase(it);
  asleep_[worker] = 0;
  state_.fetch_add(kUnparkedOne, std::memory_order_seq_cst);
  return true;
}

bool Idle::is_parked(std::uint32_t worker) const {
  std::lock_guard lock(mutex_);
  return asleep_[worker] != 0;
}

std::uint32_t Idle::searching() const {
  return searching_of(state_.load(std::memory_order_seq_cst));
}

std::uint32_t Idle::unparked() const {
  return unparked_of(state_.load(std::memory_order_seq_cst));
}

}  // namespace ferry::runtime
