// A task's receive side of one socket, served by its home worker (see recv_stream.hh).
#include "lib/runtime/recv_stream.hh"

#include <poll.h>

#include <algorithm>
#include <cassert>

#include "lib/runtime/worker.hh"

namespace ferry::runtime {

RecvStream::RecvStream(Worker& home, int fd, const void* owner, StreamCounters* counters)
    : Completion(&RecvStream::on_recv),
      home_(home),
      socket_(fd, reinterpret_cast<std::uintptr_t>(static_cast<Completion*>(this))),
      owner_(owner),
      counters_(counters) {
  assert(home.has_recv() || current_worker() == nullptr);
}

RecvStream::~RecvStream() {
  // Normally close() unlinked it on the home worker. Otherwise the runtime has stopped and is
  // freeing frames: no worker runs, the list can be touched from here.
  home_.unlink_stream(this);
}

void RecvStream::give_back(RecvBatch& batch) {
  if (!batch.spans.empty()) {
    home_.engine().release(batch.spans);
    if (counters_ != nullptr) counters_->released_bytes.add(batch.bytes);
    batch.spans.clear();
  }
  handed_bytes_ -= std::min(handed_bytes_, batch.bytes);
  batch.bytes = 0;
}

void RecvStream::check_high_water(std::uint64_t arriving_bytes) {
  const std::uint64_t held = held_bytes() + arriving_bytes;
  if (high_water_bytes_ == 0 || held <= high_water_bytes_) return;
  if (socket_.state() == uring::RecvSocket::State::closed || home_.engine().paused(socket_)) return;
  ++pauses_;
  home_.engine().pause(socket_);
  arm_reset_watch();
}

void RecvStream::arm_reset_watch() {
  // Once per stream: the poll stays armed across resumes (a recv reports the reset then, and
  // the handler is idempotent), and it costs one SQE only on streams that ever paused.
  if (reset_fn_ == nullptr || watch_used_ || closer_ != nullptr || closed_) return;
  watch_used_ = true;
  watch_armed_ = true;
  io_uring_sqe* sqe = home_.ring().sqe();
  io_uring_prep_poll_add(sqe, socket_.fd(), POLLERR);
  io_uring_sqe_set_data64(sqe, reset_watch_.user_data());
}

void RecvStream::cancel_reset_watch() {
  if (!watch_armed_ || watch_cancel_sent_) return;
  watch_cancel_sent_ = true;
  io_uring_sqe* sqe = home_.ring().sqe();
  io_uring_prep_poll_remove(sqe, reset_watch_.user_data());
  io_uring_sqe_set_data64(sqe, uring::kIgnoredUserData);
}

bool RecvStream::fully_closed() const {
  return socket_.state() == uring::RecvSocket::State::closed && !watch_armed_;
}

void RecvStream::on_reset_watch(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  RecvStream* stream = static_cast<ResetWatch*>(self)->stream;
  stream->watch_armed_ = false;
  // -ECANCELED after close()'s removal; a mask without POLLERR cannot come (only POLLERR was
  // asked for), but is no reason to reset either.
  if (cqe.res > 0 && (cqe.res & POLLERR) != 0 && stream->closer_ == nullptr && !stream->closed_) {
    stream->reset_fn_(stream->reset_context_);
  }
  if (stream->closer_ != nullptr && stream->fully_closed()) {
    CloseAwaiter* closer = std::exchange(stream->closer_, nullptr);
    stream->shut(closer->batch_);
    worker.io_ready(closer->task_);
  }
}

void RecvStream::check_low_water() {
  if (high_water_bytes_ == 0 || held_bytes() > low_water_bytes_) return;
  if (closed_ || closer_ != nullptr || !home_.engine().paused(socket_)) return;
  home_.engine().resume(socket_);
}

bool RecvStream::take(RecvBatch& batch) {
  give_back(batch);
  check_low_water();
  if (!started_) {
    started_ = true;
    home_.link_stream(this);
    home_.engine().start(socket_);
  }
  if (!pending_.empty()) {
    // Swap, not copy: the two vectors trade their storage round after round.
    std::swap(pending_, batch.spans);
    batch.bytes = pending_bytes_;
    handed_bytes_ += pending_bytes_;
    pending_bytes_ = 0;
    return true;
  }
  if (end_ != RecvBatch::End::none) {
    batch.end = end_;
    batch.error = error_;
    return true;
  }
  return false;
}

bool RecvStream::shut(RecvBatch& batch) {
  give_back(batch);
  if (!pending_.empty()) {
    home_.engine().release(pending_);
    pending_.clear();
    pending_bytes_ = 0;
  }
  if (closed_) return true;
  cancel_reset_watch();
  const bool recv_closed =
      socket_.state() == uring::RecvSocket::State::closed || home_.engine().close(socket_);
  if (recv_closed && !watch_armed_) {
    finish_close();
    return true;
  }
  return false;  // a cancel is queued; its final completion arrives through on_recv or the watch
}

void RecvStream::finish_close() {
  closed_ = true;
  home_.unlink_stream(this);
  if (counters_ != nullptr) counters_->closed.add();
}

void RecvStream::on_recv(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* stream = static_cast<RecvStream*>(self);
  // Paused before the engine sees the completion: a recv that ends with it (its limit reached)
  // is then not re-armed while the stream holds more than high water. So every recv starts at
  // most at high water and adds at most its limit (high water) before its pause lands.
  if (cqe.res > 0) stream->check_high_water(static_cast<std::uint64_t>(cqe.res));
  uring::RecvEvent event = worker.engine().handle(stream->socket_, cqe);
  switch (event.kind) {
    case uring::RecvEvent::Kind::data:
      // Kept per completion: the buffer ring counts one hold per completion and buffer, so
      // spans of two completions must be released separately even when adjacent.
      stream->pending_.insert(stream->pending_.end(), event.spans.begin(), event.spans.end());
      stream->pending_bytes_ += event.bytes;
      stream->peak_held_bytes_ = std::max(stream->peak_held_bytes_, stream->held_bytes());
      break;
    case uring::RecvEvent::Kind::eof:
      stream->end_ = RecvBatch::End::eof;
      break;
    case uring::RecvEvent::Kind::error:
      stream->end_ = RecvBatch::End::error;
      stream->error_ = event.error;
      break;
    case uring::RecvEvent::Kind::canceled:
      stream->end_ = RecvBatch::End::canceled;
      break;
    case uring::RecvEvent::Kind::parked:
    case uring::RecvEvent::Kind::none:
      break;
  }
  if (stream->waiter_ != nullptr) {
    NextAwaiter* waiter = stream->waiter_;
    if (stream->take(waiter->batch_)) {
      stream->waiter_ = nullptr;
      worker.io_ready(waiter->task_);
    }
  }
  if (stream->closer_ != nullptr && stream->fully_closed()) {
    CloseAwaiter* closer = std::exchange(stream->closer_, nullptr);
    stream->shut(closer->batch_);
    worker.io_ready(closer->task_);
  }
}

// ---- awaiters ----

bool RecvStream::NextAwaiter::await_ready() {
  // On the home worker the stream's state can be used right here.
  return current_worker() == &stream_.home_ && stream_.take(batch_);
}

void RecvStream::NextAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  Worker* here = current_worker();
  if (here == &stream_.home_) {
    stream_.waiter_ = this;  // take() found nothing in await_ready
    return;
  }
  here->counters().home_requests.add();
  here->defer_post(stream_.home_, this);
}

void RecvStream::NextAwaiter::on_home(HomeRequest* self, Worker& home) {
  auto* awaiter = static_cast<NextAwaiter*>(self);
  if (awaiter->stream_.take(awaiter->batch_)) {
    home.io_ready(awaiter->task_);
  } else {
    awaiter->stream_.waiter_ = awaiter;
  }
}

bool RecvStream::CloseAwaiter::await_ready() {
  return current_worker() == &stream_.home_ && stream_.shut(batch_);
}

void RecvStream::CloseAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  Worker* here = current_worker();
  if (here == &stream_.home_) {
    stream_.closer_ = this;
    return;
  }
  here->counters().home_requests.add();
  here->defer_post(stream_.home_, this);
}

void RecvStream::CloseAwaiter::on_home(HomeRequest* self, Worker& home) {
  auto* awaiter = static_cast<CloseAwaiter*>(self);
  if (awaiter->stream_.shut(awaiter->batch_)) {
    home.io_ready(awaiter->task_);
  } else {
    awaiter->stream_.closer_ = awaiter;
  }
}

}  // namespace ferry::runtime

namespace ferry::runtime {

bool RecvStream::ReleaseAwaiter::await_ready() {
  if (current_worker() != &stream_.home_) return false;
  for (RecvBatch& b : batches_) stream_.give_back(b);
  stream_.check_low_water();
  return true;
}

void RecvStream::ReleaseAwaiter::await_suspend(std::coroutine_handle<Task::promise_type> handle) {
  task_ = header_of(handle);
  Worker* here = current_worker();
  here->counters().home_requests.add();
  here->defer_post(stream_.home_, this);
}

void RecvStream::ReleaseAwaiter::on_home(HomeRequest* self, Worker& home) {
  auto* awaiter = static_cast<ReleaseAwaiter*>(self);
  for (RecvBatch& b : awaiter->batches_) awaiter->stream_.give_back(b);
  awaiter->stream_.check_low_water();
  home.io_ready(awaiter->task_);
}

}  // namespace ferry::runtime
