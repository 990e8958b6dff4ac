// One plain receive into the caller's buffer from a task: IORING_OP_RECV linked to an
// IORING_OP_LINK_TIMEOUT on the current worker's ring. For the few bytes a connection starts
// with (a PROXY protocol header), before its stream goes to the provided buffer rings.
#pragma once

#include <cstddef>
#include <cstdint>

#include "lib/runtime/timed_op.hh"

namespace ferry::runtime {

// co_await recv_with_timeout(fd, buffer, bytes, timeout_ms): the bytes received (0 at EOF), or a
// negative errno (-ETIMEDOUT when the timeout fired first). The buffer must stay valid until the
// task resumes, which is once both completions (recv and timer) arrived.
class RecvOnceAwaiter : public TimedOp {
 public:
  RecvOnceAwaiter(int fd, void* buffer, std::size_t bytes, std::uint32_t timeout_ms)
      : TimedOp(timeout_ms), fd_(fd), buffer_(buffer), bytes_(bytes) {}
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);

 private:
  int fd_;
  void* buffer_;
  std::size_t bytes_;
};

inline RecvOnceAwaiter recv_with_timeout(int fd, void* buffer, std::size_t bytes,
                                         std::uint32_t timeout_ms) {
  return {fd, buffer, bytes, timeout_ms};
}

}  // namespace ferry::runtime
