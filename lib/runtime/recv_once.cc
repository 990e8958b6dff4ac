// One receive with a linked timeout (see recv_once.hh).
#include "lib/runtime/recv_once.hh"

namespace ferry::runtime {

void RecvOnceAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  io_uring_sqe* sqe = start(handle);
  io_uring_prep_recv(sqe, fd_, buffer_, bytes_, 0);
  link(sqe);
}

}  // namespace ferry::runtime
