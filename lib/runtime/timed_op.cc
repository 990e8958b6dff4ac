// An io_uring operation with a linked timeout (see timed_op.hh).
#include "lib/runtime/timed_op.hh"

#include <cerrno>

#include "lib/runtime/worker.hh"

namespace ferry::runtime {

TimedOp::TimedOp(std::uint32_t timeout_ms)
    : op_(&TimedOp::on_op, this), timer_(&TimedOp::on_timer, this) {
  timeout_.tv_sec = timeout_ms / 1000;
  timeout_.tv_nsec = static_cast<long long>(timeout_ms % 1000) * 1'000'000;
}

io_uring_sqe* TimedOp::start(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  worker_ = current_worker();
  // The pair must go in one submission: a link cut at the end of a batch would leave the
  // timeout without its operation.
  if (io_uring_sq_space_left(worker_->ring().get()) < 2) worker_->ring().submit();
  return worker_->ring().sqe();
}

void TimedOp::link(io_uring_sqe* op) {
  op->flags |= IOSQE_IO_LINK;
  io_uring_sqe_set_data64(op, op_.user_data());
  io_uring_sqe* sqe = worker_->ring().sqe();
  io_uring_prep_link_timeout(sqe, &timeout_, 0);
  io_uring_sqe_set_data64(sqe, timer_.user_data());
  outstanding_ = 2;
}

void TimedOp::on_op(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* part = static_cast<Part*>(self);
  part->owner->op_result_ = cqe.res;
  part->owner->part_done(worker);
}

void TimedOp::on_timer(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* part = static_cast<Part*>(self);
  part->owner->timer_result_ = cqe.res;
  part->owner->part_done(worker);
}

void TimedOp::part_done(Worker& worker) {
  if (--outstanding_ == 0) worker.io_ready(task_);
}

int TimedOp::await_resume() const noexcept {
  // The timer fired: it cancelled the operation, which then reports -ECANCELED.
  if (op_result_ == -ECANCELED && timer_result_ == -ETIME) return -ETIMEDOUT;
  if (op_result_ == -EINTR) return -ETIMEDOUT;
  return op_result_;
}

}  // namespace ferry::runtime
