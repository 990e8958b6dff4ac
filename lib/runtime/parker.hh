// How a worker sleeps: blocked in its own io_uring wait, so its I/O completions wake it, with an
// eventfd read always armed on the ring so any thread can wake it too. The eventfd is written only
// when the worker really sleeps (state PARKED), so wakes of busy workers cost one atomic exchange.
#pragma once

#include <atomic>
#include <cstdint>

#include "lib/common/unique_fd.hh"
#include "lib/runtime/completion.hh"
#include "lib/uring/uring.hh"

namespace ferry::runtime {

class Parker {
 public:
  Parker();  // throws std::system_error when no eventfd can be made

  // Owner: submits queued SQEs and waits for a completion, a wake or `timeout_ms` (< 0: no
  // timeout). Returns at once when unpark() came first. The wake read must be armed (arm_wake).
  void park(uring::Uring& ring, int timeout_ms);
  // Any thread: makes the next or current park() return.
  void unpark();
  // Owner: consumes a pending unpark without sleeping; true when there was one.
  bool take_notification();

  // Owner: queues the eventfd read (again) on `ring`; its completion is handled by wake_completion.
  void arm_wake(uring::Uring& ring);
  // Owner: the ring is going away; the read's final completion must not re-arm it.
  void disarm() { ring_ = nullptr; }
  bool sleeping() const { return state_.load(std::memory_order_seq_cst) == kParked; }

 private:
  enum : std::uint32_t { kEmpty, kParked, kNotified };
  static void on_wake_read(Completion* self, Worker& worker, const io_uring_cqe& cqe);

  struct WakeRead : Completion {
    WakeRead() : Completion(&Parker::on_wake_read) {}
    Parker* parker = nullptr;
    std::uint64_t value = 0;
    bool armed = false;
  };

  alignas(64) std::atomic<std::uint32_t> state_{kEmpty};
  UniqueFd eventfd_;
  WakeRead wake_;
  uring::Uring* ring_ = nullptr;  // where the wake read is armed
};

}  // namespace ferry::runtime
