// The TCP runtime: W workers (threads, or driven step by step by a test), the queues they share
// (global I/O queue, injection queue, ready-worker index), the gate on waking parked workers, and
// the owner of every spawned task until it finishes.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "lib/common/env.hh"
#include "lib/metrics/registry.hh"
#include "lib/runtime/idle.hh"
#include "lib/runtime/ready_index.hh"
#include "lib/runtime/task.hh"
#include "lib/runtime/task_queue.hh"
#include "lib/runtime/worker.hh"
#include "lib/uring/buffer_ring.hh"
#include "lib/uring/recv_options.hh"
#include "lib/uring/uring.hh"

namespace ferry::runtime {

// Where tasks resumed by an I/O completion go (tcp.scheduler.io_ready).
enum class IoReadyMode {
  inbox,   // the reaping worker's inbox; idle workers steal from inboxes by scanning (default)
  global,  // one global queue every worker pops
  index,   // the reaping worker's inbox, plus the ready-worker index searchers pop
};
std::string_view to_string(IoReadyMode mode);

// FERRY_TASK_GLOBAL_IO_READY=1 selects global, FERRY_TASK_IO_READY_INDEX=1 selects index, over the
// configured mode; both at once is a startup error (std::invalid_argument). `lookup` is getenv by
// default.
IoReadyMode io_ready_with_env(IoReadyMode configured, EnvLookup lookup = nullptr);
// FERRY_TASK_INDEX_DRAIN=N (1..64) overrides how many tasks a searcher takes from an inbox it found
// through the index.
std::uint32_t index_drain_with_env(std::uint32_t configured, EnvLookup lookup = nullptr);

// Called once per worker (on the thread that starts the runtime) with the worker's name; returns
// the function the worker calls to show it is alive, at least every park_timeout_ms.
using HeartbeatHook = std::function<std::function<void()>(const std::string& worker)>;

struct RuntimeConfig {
  std::uint32_t workers = 2;
  IoReadyMode io_ready = IoReadyMode::inbox;
  std::uint32_t index_drain = 4;  // tasks taken from an inbox found through the index
  // Step mode: no threads; every worker lives on the caller's thread, which drives step(w).
  bool step_mode = false;
  // Longest sleep of an idle worker (its heartbeat cadence). < 0: sleep until woken, which turns
  // a lost wakeup into a hang a test can see instead of a 200 ms hiccup.
  int park_timeout_ms = 200;
  // Count parks that happen while every worker sleeps and work is queued (lost wakeups); costs a
  // scan of every queue per park, for tests.
  bool check_parking = false;
  std::string name_prefix = "tcp-";
  uring::UringParams ring{};
  // When set, every worker gets a provided-buffer ring of this geometry and a receive engine
  // (RecvStream needs them). `incremental` is honoured only if the kernel accepts it.
  std::optional<uring::BufferRingConfig> buffers;
  uring::RecvModes recv_modes{};
  // How much of its ring one recv may take (see uring::RecvLimits; tcp.buffers.recv_credit_bytes).
  // Off here (0: a recv may take the whole ring and park on ENOBUFS); ferryd's config turns it on.
  uring::RecvLimits recv_limits{};
  HeartbeatHook heartbeat;
};

class Runtime {
 public:
  explicit Runtime(RuntimeConfig config);
  ~Runtime();  // stop(), then frees the frames of tasks that never finished
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Sets up every worker's rings (on its own thread in threaded mode) and starts the threads.
  // Throws what a worker's setup threw (std::system_error, std::invalid_argument); nothing is
  // left running then.
  void start();
  // Stops the workers and joins them. Tasks still suspended stay allocated until destruction.
  void stop();
  bool running() const { return started_ && !stopped_; }

  // Any thread. On one of this runtime's workers the task goes onto that worker's run queue,
  // elsewhere onto the injection queue; a parked worker is woken if nobody is searching.
  void spawn(Task task);
  // Step mode, or the worker's own thread: onto worker `worker`'s run queue, no wake.
  void spawn_on(std::uint32_t worker, Task task);
  // Control path: runs `fn` on worker `worker` soon (a listener to arm, sockets to shut down).
  void post(std::uint32_t worker, std::function<void(Worker&)> fn);
  // Step mode: one scheduling decision of worker `worker` (Worker::step): maintenance, then one
  // task, a search or a park. run_one() skips the maintenance, poll() does only the maintenance;
  // together they let a test place completions exactly.
  Worker::StepResult step(std::uint32_t worker);
  Worker::StepResult run_one(std::uint32_t worker);
  void poll(std::uint32_t worker);

  const RuntimeConfig& config() const { return config_; }
  std::uint32_t worker_count() const { return static_cast<std::uint32_t>(workers_.size()); }
  Worker& worker(std::uint32_t index) { return *workers_[index]; }
  const WorkerCounters& counters(std::uint32_t index) const { return workers_[index]->counters(); }
  // [{"worker":"tcp-0","tasks_run":..,...}, ...] for `ferryctl workers`.
  nlohmann::json workers_json() const;
  // ferry_runtime_*_total{worker} and, with buffers, each worker's ferry_uring_* receive metrics.
  // The handles must be dropped before the runtime is destroyed.
  [[nodiscard]] std::vector<metrics::Registry::Handle> register_metrics(
      metrics::Registry& registry);

  std::size_t live_tasks() const;
  // Workers registered as asleep right now (a snapshot: one may be waking as this returns).
  std::uint32_t parked_workers() const { return worker_count() - idle_.unparked(); }
  // Parks that left every worker asleep with work queued (counted only with check_parking).
  std::uint64_t lost_wakeups() const { return lost_wakeups_.load(std::memory_order_relaxed); }
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

 private:
  friend class Worker;
  friend struct Task::promise_type;

  void adopt(TaskHeader* task);   // into the live list
  void forget(TaskHeader* task);  // frame finished
  void worker_thread(std::uint32_t index);

  RuntimeConfig config_;
  std::vector<std::unique_ptr<Worker>> workers_;
  Idle idle_;
  ReadyIndex index_;
  TaskQueue global_;  // io_ready=global
  TaskQueue inject_;  // spawns from outside the workers, local queue overflow
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> lost_wakeups_{0};
  std::vector<std::thread> threads_;
  bool started_ = false;
  bool stopped_ = false;

  mutable std::mutex live_mutex_;
  TaskHeader* live_head_ = nullptr;  // guarded by live_mutex_
  std::size_t live_count_ = 0;       // guarded by live_mutex_
  bool tearing_down_ = false;        // guarded by live_mutex_
};

}  // namespace ferry::runtime
