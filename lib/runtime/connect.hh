// Connecting a socket from a task: IORING_OP_CONNECT linked to an IORING_OP_LINK_TIMEOUT on the
// current worker's ring, so a backend that never answers costs one timer, not a hung task.
#pragma once

#include <sys/socket.h>

#include <cstdint>

#include "lib/runtime/timed_op.hh"

namespace ferry::runtime {

// co_await connect_with_timeout(fd, addr, len, timeout_ms): 0 when connected, else a negative
// errno (-ECONNREFUSED, -ENETUNREACH, ...; -ETIMEDOUT when the timeout fired first). `fd` must be
// a non-blocking stream socket. The task resumes once both completions (connect and timer)
// arrived, so nothing in the kernel refers to the awaiter any more.
class ConnectAwaiter : public TimedOp {
 public:
  ConnectAwaiter(int fd, const sockaddr_storage& addr, socklen_t len, std::uint32_t timeout_ms)
      : TimedOp(timeout_ms), fd_(fd), addr_(addr), len_(len) {}
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);

 private:
  int fd_;
  sockaddr_storage addr_;
  socklen_t len_;
};

inline ConnectAwaiter connect_with_timeout(int fd, const sockaddr_storage& addr, socklen_t len,
                                           std::uint32_t timeout_ms) {
  return {fd, addr, len, timeout_ms};
}

}  // namespace ferry::runtime
