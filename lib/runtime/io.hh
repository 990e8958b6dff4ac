// What a task awaits besides receiving: giving the worker up (yield), a no-op round trip through
// the worker's io_uring (an I/O resumption without a socket, for tests and benchmarks), and
// sending a list of spans completely (partial sends continue without waking the task).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstdint>
#include <span>
#include <vector>

#include "lib/runtime/completion.hh"
#include "lib/runtime/task.hh"

namespace ferry::runtime {

// co_await yield_now(): back to the end of the current worker's run queue.
struct YieldAwaiter {
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  void await_resume() const noexcept {}
};
inline YieldAwaiter yield_now() {
  return {};
}

// co_await nop(): an IORING_OP_NOP on the current worker's ring; the task is resumed the way
// every I/O completion resumes tasks (io_ready mode). Returns the CQE result (0).
class NopAwaiter : private Completion {
 public:
  NopAwaiter() : Completion(&NopAwaiter::on_done) {}
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  int await_resume() const noexcept { return result_; }

 private:
  static void on_done(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  TaskHeader* task_ = nullptr;
  int result_ = 0;
};
inline NopAwaiter nop() {
  return {};
}

// co_await send_all(fd, spans, scratch): sendmsg (a plain send for one span) of every byte of
// `spans` on the current worker's ring, continuing after partial sends on the ring that completed
// them. Returns the bytes sent (all of them) or a negative errno. `scratch` holds the iovec
// cursor (its capacity is reused); the memory the spans point at must stay untouched until the
// task resumes.
class SendAll : private Completion {
 public:
  SendAll(int fd, std::span<const iovec> spans, std::vector<iovec>& scratch);
  bool await_ready() const noexcept { return remaining_ == 0; }
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  std::int64_t await_resume() const noexcept { return result_; }

 private:
  static void on_sent(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  void submit(Worker& worker);

  int fd_;
  std::vector<iovec>& iov_;
  std::size_t first_ = 0;  // first iovec not completely sent
  std::uint64_t total_ = 0;
  std::uint64_t remaining_ = 0;
  std::int64_t result_ = 0;
  msghdr msg_{};
  TaskHeader* task_ = nullptr;
};
inline SendAll send_all(int fd, std::span<const iovec> spans, std::vector<iovec>& scratch) {
  return {fd, spans, scratch};
}

}  // namespace ferry::runtime
