// A task's receive side of one socket: the multishot (bundled) recv of lib/uring on its home
// worker's buffer ring, with the received spans queued until the task asks for them. The task may
// run on any worker; everything that touches the home's ring, engine or buffers happens on the
// home (inline when the task is there, through the home's mailbox when it is not).
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "lib/metrics/registry.hh"
#include "lib/runtime/completion.hh"
#include "lib/runtime/mailbox.hh"
#include "lib/runtime/task.hh"
#include "lib/uring/recv_engine.hh"

namespace ferry::runtime {

class Worker;

// What next() hands the task: received bytes as spans of the home's buffer ring, passed on as
// they are (sendmsg iovecs). They stay the task's until its next next() or close() gives them back.
struct RecvBatch {
  enum class End : std::uint8_t { none, eof, error, canceled };
  std::vector<iovec> spans;  // one entry per span of each completion, never merged across them
  std::uint64_t bytes = 0;
  End end = End::none;  // set once no more data will come
  int error = 0;        // negative errno with End::error
};

// Counters a stream bumps on its home worker (single writer there).
struct StreamCounters {
  metrics::Counter released_bytes;  // bytes given back to the buffer ring after use
  metrics::Counter closed;          // streams closed
};

class RecvStream : private Completion {
 public:
  // `home` must have a receive engine (RuntimeConfig::buffers). `owner` tags the stream for
  // Worker::shutdown_streams; `counters`, when given, must outlive the stream and belong to home.
  RecvStream(Worker& home, int fd, const void* owner = nullptr, StreamCounters* counters = nullptr);
  // Call close() first; destroying an open stream is only safe once its runtime has stopped.
  ~RecvStream();
  RecvStream(const RecvStream&) = delete;
  RecvStream& operator=(const RecvStream&) = delete;

  Worker& home() { return home_; }
  int fd() const { return socket_.fd(); }
  const void* owner() const { return owner_; }

  // Backpressure (before the first next()): while the bytes received and not yet given back
  // (queued here plus handed to the task) exceed `high_bytes`, the recv is paused; it resumes
  // when they fall to `low_bytes`. 0 (the default) never pauses. Each recv is limited to
  // `high_bytes` too, since the recv armed when the mark is crossed keeps delivering until its
  // pause lands: whenever a recv is armed the stream holds at most `high_bytes`, so it holds at
  // most 2 x `high_bytes`.
  // Home-side state: read the getters only on the home worker, or after the stream closed.
  void set_water_marks(std::uint64_t high_bytes, std::uint64_t low_bytes) {
    high_water_bytes_ = high_bytes;
    low_water_bytes_ = low_bytes;
    socket_.set_recv_cap_bytes(
        static_cast<std::uint32_t>(std::min<std::uint64_t>(high_bytes, UINT32_MAX)));
  }
  std::uint64_t held_bytes() const { return pending_bytes_ + handed_bytes_; }
  std::uint64_t peak_held_bytes() const { return peak_held_bytes_; }
  std::uint64_t pauses() const { return pauses_; }

  // A paused socket has no recv to report a reset, so a task stuck sending elsewhere would never
  // learn of it. With a handler set (before the first next()), the first pause arms a poll for
  // POLLERR on the socket, and a reset (or any socket error) calls `fn(context)` on the home
  // worker while the stream is open. A graceful FIN is not an error and does not call it.
  using ResetFn = void (*)(void* context);
  void set_reset_handler(ResetFn fn, void* context) {
    reset_fn_ = fn;
    reset_context_ = context;
  }

  class NextAwaiter;
  class CloseAwaiter;
  class ReleaseAwaiter;
  // co_await: gives back the spans `batch` holds, then waits for received bytes. True with
  // data in `batch`; false once the stream ended (batch.end says how). The first call starts the
  // recv.
  NextAwaiter next(RecvBatch& batch);
  // co_await: gives back `batch` and anything queued, stops receiving and returns once no
  // completion can arrive for this socket any more. The caller closes the fd afterwards.
  CloseAwaiter close(RecvBatch& batch);
  // co_await: gives back the spans of every batch in `batches` now, without waiting for data;
  // for consumers that collect several batches (a whole message) before they are done with them.
  ReleaseAwaiter release(std::span<RecvBatch> batches);

 private:
  friend class Worker;
  static void on_recv(Completion* self, Worker& worker, const io_uring_cqe& cqe);

  // Home-side steps.
  bool take(RecvBatch& batch);  // gives back, starts if needed; true when batch is now filled
  bool shut(RecvBatch& batch);  // gives back, closes; true when closed already
  void give_back(RecvBatch& batch);
  void finish_close();
  void check_high_water(std::uint64_t arriving_bytes);  // as a completion brings bytes
  void check_low_water();                               // after bytes were given back
  void arm_reset_watch();
  void cancel_reset_watch();
  bool fully_closed() const;  // the recv ended and the reset watch's poll completed

  // The poll on a paused socket (its own completion: the recv's user_data is the stream's).
  struct ResetWatch : Completion {
    explicit ResetWatch(RecvStream* s) : Completion(&RecvStream::on_reset_watch), stream(s) {}
    RecvStream* stream;
  };
  static void on_reset_watch(Completion* self, Worker& worker, const io_uring_cqe& cqe);

  Worker& home_;
  uring::RecvSocket socket_;
  const void* owner_;
  StreamCounters* counters_;
  std::vector<iovec> pending_;  // received, not yet handed to the task
  std::uint64_t pending_bytes_ = 0;
  std::uint64_t handed_bytes_ = 0;  // in batches the task holds
  std::uint64_t high_water_bytes_ = 0;
  std::uint64_t low_water_bytes_ = 0;
  std::uint64_t peak_held_bytes_ = 0;
  std::uint64_t pauses_ = 0;
  ResetFn reset_fn_ = nullptr;
  void* reset_context_ = nullptr;
  ResetWatch reset_watch_{this};
  bool watch_armed_ = false;        // the poll is outstanding
  bool watch_used_ = false;         // armed once already: a stream watches at most once
  bool watch_cancel_sent_ = false;  // close() asked the kernel to remove the poll
  RecvBatch::End end_ = RecvBatch::End::none;
  int error_ = 0;
  bool started_ = false;
  bool closed_ = false;
  NextAwaiter* waiter_ = nullptr;    // the task waits in next()
  CloseAwaiter* closer_ = nullptr;   // the task waits in close()
  RecvStream* list_prev_ = nullptr;  // the home worker's list of open streams
  RecvStream* list_next_ = nullptr;
  bool linked_ = false;
};

class RecvStream::NextAwaiter : private HomeRequest {
 public:
  NextAwaiter(RecvStream& stream, RecvBatch& batch)
      : HomeRequest(&NextAwaiter::on_home), stream_(stream), batch_(batch) {}
  bool await_ready();
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  bool await_resume() const noexcept { return !batch_.spans.empty(); }

 private:
  friend class RecvStream;
  static void on_home(HomeRequest* self, Worker& home);
  RecvStream& stream_;
  RecvBatch& batch_;
  TaskHeader* task_ = nullptr;
};

class RecvStream::CloseAwaiter : private HomeRequest {
 public:
  CloseAwaiter(RecvStream& stream, RecvBatch& batch)
      : HomeRequest(&CloseAwaiter::on_home), stream_(stream), batch_(batch) {}
  bool await_ready();
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  void await_resume() const noexcept {}

 private:
  friend class RecvStream;
  static void on_home(HomeRequest* self, Worker& home);
  RecvStream& stream_;
  RecvBatch& batch_;
  TaskHeader* task_ = nullptr;
};

class RecvStream::ReleaseAwaiter : private HomeRequest {
 public:
  ReleaseAwaiter(RecvStream& stream, std::span<RecvBatch> batches)
      : HomeRequest(&ReleaseAwaiter::on_home), stream_(stream), batches_(batches) {}
  bool await_ready();
  void await_suspend(std::coroutine_handle<Task::promise_type> handle);
  void await_resume() const noexcept {}

 private:
  static void on_home(HomeRequest* self, Worker& home);
  RecvStream& stream_;
  std::span<RecvBatch> batches_;
  TaskHeader* task_ = nullptr;
};

inline RecvStream::ReleaseAwaiter RecvStream::release(std::span<RecvBatch> batches) {
  return {*this, batches};
}
inline RecvStream::NextAwaiter RecvStream::next(RecvBatch& batch) {
  return {*this, batch};
}
inline RecvStream::CloseAwaiter RecvStream::close(RecvBatch& batch) {
  return {*this, batch};
}

}  // namespace ferry::runtime
