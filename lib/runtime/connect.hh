// Connecting a socket from a task: IORING_OP_CONNECT linked to an IORING_OP_LINK_TIMEOUT on the
// current worker's ring, so a backend that never answers costs one timer, not a hung task.
#pragma once

#include <linux/time_types.h>
#include <sys/socket.h>

#include <cstdint>

#include "lib/runtime/completion.hh"
#include "lib/runtime/task.hh"

namespace ferry::runtime {

// co_await connect_with_timeout(fd, addr, len, timeout_ms): 0 when connected, else a negative
// errno (-ECONNREFUSED, -ENETUNREACH, ...; -ETIMEDOUT when the timeout fired first). `fd` must be
// a non-blocking stream socket. The task resumes once both completions (connect and timer)
// arrived, so nothing in the kernel refers to the awaiter any more.
class ConnectAwaiter {
 public:
  ConnectAwaiter(int fd, const sockaddr_storage& addr, socklen_t len, std::uint32_t timeout_ms);
  ConnectAwaiter(const ConnectAwaiter&) = delete;
  ConnectAwaiter& operator=(const ConnectAwaiter&) = delete;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  int await_resume() const noexcept;

 private:
  struct Part : Completion {
    Part(Fn fn, ConnectAwaiter* o) : Completion(fn), owner(o) {}
    ConnectAwaiter* owner;
  };
  static void on_connect(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  static void on_timer(Completion* self, Worker& worker, const io_uring_cqe& cqe);
  void part_done(Worker& worker);

  int fd_;
  sockaddr_storage addr_;
  socklen_t len_;
  __kernel_timespec timeout_{};
  Part connect_;
  Part timer_;
  int connect_result_ = 0;
  int timer_result_ = 0;
  int outstanding_ = 0;
  TaskHeader* task_ = nullptr;
};

inline ConnectAwaiter connect_with_timeout(int fd, const sockaddr_storage& addr, socklen_t len,
                                           std::uint32_t timeout_ms) {
  return {fd, addr, len, timeout_ms};
}

}  // namespace ferry::runtime
