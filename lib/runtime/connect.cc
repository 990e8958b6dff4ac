// Connecting a socket from a task with a linked timeout (see connect.hh).
#include "lib/runtime/connect.hh"

#include <cerrno>

#include "lib/runtime/worker.hh"

namespace ferry::runtime {

ConnectAwaiter::ConnectAwaiter(int fd, const sockaddr_storage& addr, socklen_t len,
                               std::uint32_t timeout_ms)
    : fd_(fd),
      addr_(addr),
      len_(len),
      connect_(&ConnectAwaiter::on_connect, this),
      timer_(&ConnectAwaiter::on_timer, this) {
  timeout_.tv_sec = timeout_ms / 1000;
  timeout_.tv_nsec = static_cast<long long>(timeout_ms % 1000) * 1'000'000;
}

void ConnectAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  Worker& worker = *current_worker();
  // The pair must go in one submission: a link cut at the end of a batch would leave the
  // timeout without its connect.
  if (io_uring_sq_space_left(worker.ring().get()) < 2) worker.ring().submit();
  io_uring_sqe* sqe = worker.ring().sqe();
  io_uring_prep_connect(sqe, fd_, reinterpret_cast<const sockaddr*>(&addr_), len_);
  sqe->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data64(sqe, connect_.user_data());
  sqe = worker.ring().sqe();
  io_uring_prep_link_timeout(sqe, &timeout_, 0);
  io_uring_sqe_set_data64(sqe, timer_.user_data());
  outstanding_ = 2;
}

void ConnectAwaiter::on_connect(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* part = static_cast<Part*>(self);
  part->owner->connect_result_ = cqe.res;
  part->owner->part_done(worker);
}

void ConnectAwaiter::on_timer(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* part = static_cast<Part*>(self);
  part->owner->timer_result_ = cqe.res;
  part->owner->part_done(worker);
}

void ConnectAwaiter::part_done(Worker& worker) {
  if (--outstanding_ == 0) worker.io_ready(task_);
}

int ConnectAwaiter::await_resume() const noexcept {
  // The timer fired: it cancelled the connect, which then reports -ECANCELED.
  if (connect_result_ == -ECANCELED && timer_result_ == -ETIME) return -ETIMEDOUT;
  if (connect_result_ == -EINTR) return -ETIMEDOUT;
  return connect_result_;
}

}  // namespace ferry::runtime
