// Which workers are searching for work and which are parked, and the gate on waking them: a
// parked worker is woken only when work appears and nobody is already searching (the scheme of
// Tokio's multi-thread scheduler). At most half the workers search at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace ferry::runtime {

class Idle {
 public:
  explicit Idle(std::uint32_t workers);

  // A worker out of local work asks to search; refused while half the workers already search.
  bool transition_to_searching();
  // A searcher found work (or gave up). True when it was the last searcher: the caller then
  // wakes another worker so the search goes on while it runs what it found.
  bool transition_from_searching();
  // The worker goes to sleep. True when it was the last searcher: the caller must then look at
  // every queue once more and wake someone if work is there (no one else is watching).
  bool transition_to_parked(std::uint32_t worker, bool searching);
  // The gated wake: the worker to unpark (it starts out searching), or none when someone is
  // searching already or nobody sleeps.
  std::optional<std::uint32_t> worker_to_notify();
  // A parked worker woke by itself (its own I/O, a home request, a timeout) and has work: takes
  // it off the sleepers. False when a notifier took it off first (it is then a searcher).
  bool unpark_worker_by_id(std::uint32_t worker);
  // Still registered as sleeping (no notifier picked it)?
  bool is_parked(std::uint32_t worker) const;

  std::uint32_t searching() const;
  std::uint32_t unparked() const;
  std::uint32_t workers() const { return workers_; }

 private:
  // state_ packs the number of searching workers (low 32 bits) and of unparked workers (high).
  static constexpr std::uint64_t kUnparkedOne = std::uint64_t{1} << 32;
  static std::uint32_t searching_of(std::uint64_t s) { return static_cast<std::uint32_t>(s); }
  static std::uint32_t unparked_of(std::uint64_t s) { return static_cast<std::uint32_t>(s >> 32); }
  bool should_wake() const;

  const std::uint32_t workers_;
  alignas(64) mutable std::atomic<std::uint64_t> state_;
  mutable std::mutex mutex_;
  std::vector<std::uint32_t> sleepers_;  // guarded by mutex_
  std::vector<char> asleep_;             // guarded by mutex_: worker -> in sleepers_
};

}  // namespace ferry::runtime
