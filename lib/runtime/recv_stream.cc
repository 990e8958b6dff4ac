// A task's receive side of one socket, served by its home worker (see recv_stream.hh).
#include "lib/runtime/recv_stream.hh"

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

void RecvStream::check_high_water() {
  const std::uint64_t held = held_bytes();
  peak_held_bytes_ = std::max(peak_held_bytes_, held);
  if (high_water_bytes_ == 0 || held <= high_water_bytes_) return;
  if (socket_.state() == uring::RecvSocket::State::closed || home_.engine().paused(socket_)) return;
  ++pauses_;
  home_.engine().pause(socket_);
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
  if (socket_.state() == uring::RecvSocket::State::closed || home_.engine().close(socket_)) {
    finish_close();
    return true;
  }
  return false;  // the cancel is queued; its final completion arrives through on_recv
}

void RecvStream::finish_close() {
  closed_ = true;
  home_.unlink_stream(this);
  if (counters_ != nullptr) counters_->closed.add();
}

void RecvStream::on_recv(Completion* self, Worker& worker, const io_uring_cqe& cqe) {
  auto* stream = static_cast<RecvStream*>(self);
  uring::RecvEvent event = worker.engine().handle(stream->socket_, cqe);
  switch (event.kind) {
    case uring::RecvEvent::Kind::data:
      // Kept per completion: the buffer ring counts one hold per completion and buffer, so
      // spans of two completions must be released separately even when adjacent.
      stream->pending_.insert(stream->pending_.end(), event.spans.begin(), event.spans.end());
      stream->pending_bytes_ += event.bytes;
      stream->check_high_water();
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
  if (stream->closer_ != nullptr && stream->socket_.state() == uring::RecvSocket::State::closed) {
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
