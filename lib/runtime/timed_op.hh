// An io_uring operation linked to an IORING_OP_LINK_TIMEOUT on the current worker's ring, awaited
// by a task: what connect_with_timeout (connect.hh) and recv_with_timeout (recv_once.hh) share.
#pragma once

#include <linux/time_types.h>

#include <cstdint>

#include "lib/runtime/completion.hh"
#include "lib/runtime/task.hh"

namespace ferry::runtime {

// A derived awaiter's await_suspend calls start(), preps the operation on the SQE it returns,
// then link(). The task resumes once both completions (operation and timer) arrived, so nothing
// in the kernel refers to the awaiter any more; await_resume() gives the operation's result, or
// -ETIMEDOUT when the timer fired first.
class TimedOp {
 public:
  explicit TimedOp(std::uint32_t timeout_ms);
  TimedOp(const TimedOp&) = delete;
  TimedOp& operator=(const TimedOp&) = delete;
  bool await_ready() const noexcept { return false; }
  int await_resume() const noexcept;

 protected:
  io_uring_sqe* start(std::coroutine_handle<Task::promise_type> handle);
  void link(io_uring_sqe* op);

 private:
  struct Part : Completion {
    Part(Fn fn, TimedOp* o) : Completion(fn), owner(o) {}
    TimedOp* owner;
  };
  static void on_op(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  static void on_timer(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  void part_done(Worker& worker);

  __kernel_timespec timeout_{};
  Part op_;
  Part timer_;
  Worker* worker_ = nullptr;
  int op_result_ = 0;
  int timer_result_ = 0;
  int outstanding_ = 0;
  TaskHeader* task_ = nullptr;
};

}  // namespace ferry::runtime
