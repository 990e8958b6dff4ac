// One worker of the TCP runtime: a thread with its own io_uring (and provided-buffer ring and
// receive engine), a local run queue others steal from, an I/O inbox where tasks resumed by this
// ring's completions land, a mailbox for work only it may do, and the loop that ties them up:
// reap completions, run tasks, search, park.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/runtime/completion.hh"
#include "lib/runtime/local_queue.hh"
#include "lib/runtime/mailbox.hh"
#include "lib/runtime/parker.hh"
#include "lib/runtime/task_queue.hh"
#include "lib/runtime/worker_counters.hh"
#include "lib/uring/buffer_ring.hh"
#include "lib/uring/recv_counters.hh"
#include "lib/uring/recv_engine.hh"
#include "lib/uring/uring.hh"

namespace ferry::runtime {

class Runtime;
class RecvStream;

class Worker {
 public:
  Worker(Runtime& runtime, std::uint32_t index);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  std::uint32_t index() const { return index_; }
  const std::string& name() const { return name_; }
  Runtime& runtime() { return runtime_; }
  const WorkerCounters& counters() const { return counters_; }
  WorkerCounters& counters() { return counters_; }

  // --- owner thread only (the worker's thread, or the stepping thread in step mode) ---
  uring::Uring& ring() { return *ring_; }
  bool has_recv() const { return engine_ != nullptr; }
  uring::RecvEngine& engine() { return *engine_; }
  uring::BufferRing& buffers() { return *buffers_; }
  const uring::RecvCounters& recv_counters() const { return recv_counters_; }

  // A task whose I/O completed on this worker's ring is ready: it goes where io_ready says
  // (this worker's inbox, or the global queue), in a batch flushed after the reap.
  void io_ready(TaskHeader* task);
  // A task spawned or yielding here: onto the local run queue (the injection queue if full).
  void push_local(TaskHeader* task, bool notify);

  // For awaiters: publishing the suspending task to another thread (a queue others pop, another
  // worker's mailbox) is done by run() after resume() returned, so no other thread can resume the
  // frame while this one is still inside it.
  void defer_yield(TaskHeader* task) { deferred_yield_ = task; }
  void defer_post(Worker& home, HomeRequest* request) {
    deferred_home_ = &home;
    deferred_request_ = request;
  }

  // Receive streams homed here, for shutting their sockets down (stop, service removal).
  void link_stream(RecvStream* stream);
  void unlink_stream(RecvStream* stream);
  // shutdown(SHUT_RDWR) on every stream whose owner tag is `owner` (any when null): their tasks
  // see EOF/errors and end through their normal close path. Returns how many.
  std::size_t shutdown_streams(const void* owner);
  std::size_t streams() const { return stream_count_; }

  // --- any thread ---
  // Queues work that only this worker may do and wakes it.
  void post_request(HomeRequest* request);
  // Control path: runs `fn` on this worker (allocation and locking are fine here).
  void post_control(std::function<void(Worker&)> fn);
  void unpark() { parker_.unpark(); }

  // --- the runtime drives these ---
  void setup_io();     // on the owner thread: ring, buffer ring, engine, wake read
  void teardown_io();  // on the owner thread: cancel everything, drop CQEs, free the rings
  void run_loop();     // threaded mode: until the runtime stops
  enum class StepResult { ran, parked, idle };
  // Step mode: one scheduling decision, never blocking: unless `poll` is false, first the
  // maintenance (control, mailbox, submit + reap); then one task run, or a search, or a park.
  StepResult step(bool poll = true);
  // Step mode: the maintenance alone (completions land in the inbox, nothing runs).
  void poll();

  // Read by searchers and the parking check.
  bool has_stealable_work() const { return !deque_.empty() || !inbox_.empty(); }

 private:
  friend class Runtime;

  void maintenance();  // beat, control, mailbox, submit + reap, flush the ready batch
  void reap();
  void flush_ready();
  void run_control();
  void drain_mailbox();
  TaskHeader* next_local();
  TaskHeader* search();
  TaskHeader* steal_work();
  TaskHeader* steal_from_index();
  TaskHeader* scan_victim_inboxes();
  TaskHeader* take_batch(TaskList& batch);  // runs the first, queues the rest locally
  void run(TaskHeader* task);
  void park();  // threaded mode: sleep until work, a wake, own I/O or the timeout
  int park_timeout_ms() const;  // shorter while sockets wait for ring credit
  void check_lost_wakeup();
  TaskHeader* pop_shared();
  bool has_local_work() const;
  bool enter_parked();  // false: work appeared, do not sleep
  bool leave_parked();  // false: keep sleeping
  void notify_parked();
  void notify_if_work_pending();
  void beat_if_due();
  std::uint32_t next_random();

  Runtime& runtime_;
  const std::uint32_t index_;
  const std::string name_;

  // Touched by other threads.
  LocalQueue deque_;
  TaskQueue inbox_;
  Mailbox mailbox_;
  Parker parker_;
  std::mutex control_mutex_;
  std::vector<std::function<void(Worker&)>> control_;  // guarded by control_mutex_
  std::atomic<bool> control_pending_{false};
  WorkerCounters counters_;

  // Owner only.
  std::unique_ptr<uring::Uring> ring_;
  std::unique_ptr<uring::BufferRing> buffers_;
  uring::RecvCounters recv_counters_;
  std::unique_ptr<uring::RecvEngine> engine_;
  TaskHeader* deferred_yield_ = nullptr;
  Worker* deferred_home_ = nullptr;
  HomeRequest* deferred_request_ = nullptr;
  TaskList ready_;     // resumed by this reap, not yet flushed
  TaskList run_list_;  // taken from the own inbox in one batch, run before looking again
  bool searching_ = false;
  bool parked_ = false;  // step mode: asleep between steps
  bool prefer_deque_ = false;
  std::uint32_t tick_ = 0;
  std::uint32_t rng_;
  RecvStream* streams_head_ = nullptr;
  std::size_t stream_count_ = 0;
  std::function<void()> beat_;
  std::chrono::steady_clock::time_point last_beat_{};
};

// The worker whose thread (or step) is running now; null outside the runtime.
Worker* current_worker();

}  // namespace ferry::runtime
