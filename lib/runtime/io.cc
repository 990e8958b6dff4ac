// Yield, no-op I/O and complete sends for tasks (see io.hh).
#include "lib/runtime/io.hh"

#include <algorithm>
#include <cerrno>
#include <climits>

#include "lib/runtime/worker.hh"

namespace ferry::runtime {

void YieldAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  current_worker()->defer_yield(header_of(handle));
}

void NopAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  Worker& worker = *current_worker();
  io_uring_sqe* sqe = worker.ring().sqe();
  io_uring_prep_nop(sqe);
  io_uring_sqe_set_data64(sqe, user_data());
}

void NopAwaiter::on_done(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* op = static_cast<NopAwaiter*>(self);
  op->result_ = cqe.res;
  worker.io_ready(op->task_);
}

SendAll::SendAll(int fd, std::span<const iovec> spans, std::vector<iovec>& scratch)
    : Completion(&SendAll::on_sent), fd_(fd), iov_(scratch) {
  // The cursor is a copy: the caller's spans are what it later gives back to the buffer ring.
  iov_.assign(spans.begin(), spans.end());
  for (const iovec& v : spans) total_ += v.iov_len;
  remaining_ = total_;
  result_ = 0;
}

void SendAll::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  submit(*current_worker());
}

void SendAll::submit(Worker& worker) {
  io_uring_sqe* sqe = worker.ring().sqe();
  const iovec& head = iov_[first_];
  if (iov_.size() - first_ == 1 && head.iov_len <= INT_MAX) {
    // One span (every small message): a plain send, without the message header and iovec the
    // kernel would copy in and import for a sendmsg.
    io_uring_prep_send(sqe, fd_, head.iov_base, head.iov_len, MSG_NOSIGNAL);
  } else {
    msg_ = msghdr{};
    msg_.msg_iov = iov_.data() + first_;
    msg_.msg_iovlen = std::min<std::size_t>(iov_.size() - first_, IOV_MAX);
    io_uring_prep_sendmsg(sqe, fd_, &msg_, MSG_NOSIGNAL);
  }
  io_uring_sqe_set_data64(sqe, user_data());
}

void SendAll::on_sent(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* op = static_cast<SendAll*>(self);
  if (cqe.res == -EINTR || cqe.res == -EAGAIN) {
    op->submit(worker);
    return;
  }
  if (cqe.res <= 0) {
    // A zero-byte send of a non-empty message would repeat forever; the peer is gone.
    op->result_ = cqe.res < 0 ? cqe.res : -EPIPE;
    worker.io_ready(op->task_);
    return;
  }
  auto sent = static_cast<std::uint64_t>(cqe.res);
  op->remaining_ -= std::min(sent, op->remaining_);
  while (sent > 0 && op->first_ < op->iov_.size()) {
    iovec& v = op->iov_[op->first_];
    if (sent >= v.iov_len) {
      sent -= v.iov_len;
      ++op->first_;
    } else {
      v.iov_base = static_cast<std::byte*>(v.iov_base) + sent;
      v.iov_len -= sent;
      sent = 0;
    }
  }
  if (op->remaining_ > 0) {
    op->submit(worker);  // the rest, on the same ring: the task stays suspended
    return;
  }
  op->result_ = static_cast<std::int64_t>(op->total_);
  worker.io_ready(op->task_);
}

}  // namespace ferry::runtime
