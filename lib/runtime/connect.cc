// Connecting a socket from a task with a linked timeout (see connect.hh).
#include "lib/runtime/connect.hh"

namespace ferry::runtime {

void ConnectAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  io_uring_sqe* sqe = start(handle);
  io_uring_prep_connect(sqe, fd_, reinterpret_cast<const sockaddr*>(&addr_), len_);
  link(sqe);
}

}  // namespace ferry::runtime
