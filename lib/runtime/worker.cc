// One worker of the TCP runtime: its loop (reap, run, search, park) and the steps it is made of
// (see worker.hh).
#include "lib/runtime/worker.hh"

#include <sys/socket.h>

#include <exception>

#include "lib/common/log.hh"
#include "lib/runtime/recv_stream.hh"
#include "lib/runtime/runtime.hh"

namespace ferry::runtime {
namespace {

thread_local Worker* tls_current = nullptr;

struct CurrentWorker {
  explicit CurrentWorker(Worker* worker) : prev(tls_current) { tls_current = worker; }
  ~CurrentWorker() { tls_current = prev; }
  Worker* prev;
};

constexpr std::uint32_t kRunBudget = 32;    // tasks run between two reaps of the ring
constexpr std::size_t kInboxBatch = 8;      // own-inbox tasks taken under one lock
constexpr std::uint32_t kSharedEvery = 61;  // look at the shared queues first every Nth time
constexpr auto kBeatEvery = std::chrono::milliseconds(50);

}  // namespace

Worker* current_worker() {
  return tls_current;
}

Worker::Worker(Runtime& runtime, std::uint32_t index)
    : runtime_(runtime),
      index_(index),
      name_(runtime.config().name_prefix + std::to_string(index)),
      rng_(index * 0x9e3779b9u + 0x7f4a7c15u) {}

Worker::~Worker() = default;

// ---- I/O setup and teardown ----

void Worker::setup_io() {
  const RuntimeConfig& config = runtime_.config();
  ring_ = std::make_unique<uring::Uring>(config.ring);
  if (config.buffers) {
    buffers_ = std::make_unique<uring::BufferRing>(*ring_, *config.buffers);
    engine_ = std::make_unique<uring::RecvEngine>(*ring_, *buffers_, config.recv_modes,
                                                  recv_counters_, config.recv_limits);
  }
  parker_.arm_wake(*ring_);
  ring_->submit();
}

void Worker::teardown_io() {
  if (!ring_) return;
  parker_.disarm();
  // Cancel whatever is still in flight and drop the completions: the tasks they belong to are
  // freed by the runtime afterwards and must not be resumed now.
  io_uring_sqe* sqe = ring_->sqe();
  io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
  io_uring_sqe_set_data64(sqe, uring::kIgnoredUserData);
  for (int round = 0; round < 8; ++round) {
    const int rc = ring_->submit_and_wait(1, 20);
    const unsigned n = ring_->drain([](const io_uring_cqe&) {});
    if (rc == -ETIME && n == 0) break;
  }
  engine_.reset();
  buffers_.reset();
  ring_.reset();
}

// ---- the loops ----

void Worker::run_loop() {
  CurrentWorker current(this);
  while (!runtime_.stopping()) {
    maintenance();
    std::uint32_t ran = 0;
    while (ran < kRunBudget) {
      TaskHeader* task = next_local();
      if (task == nullptr) break;
      run(task);
      ++ran;
    }
    if (ran > 0) continue;
    if (TaskHeader* task = search()) {
      run(task);
      continue;
    }
    park();
  }
}

Worker::StepResult Worker::step(bool poll) {
  CurrentWorker current(this);
  if (poll) maintenance();
  if (parked_) {
    if (!leave_parked()) return StepResult::parked;
    parked_ = false;
  }
  TaskHeader* task = next_local();
  if (task == nullptr) task = search();
  if (task != nullptr) {
    run(task);
    return StepResult::ran;
  }
  if (!enter_parked()) return StepResult::idle;
  if (runtime_.config().check_parking) check_lost_wakeup();
  counters_.parks.add();
  parker_.take_notification();  // step mode never sleeps; who is asleep lives in Idle
  parked_ = true;
  return StepResult::parked;
}

void Worker::poll() {
  CurrentWorker current(this);
  maintenance();
}

void Worker::park() {
  if (!enter_parked()) return;
  while (!runtime_.stopping()) {
    if (runtime_.config().check_parking) check_lost_wakeup();
    counters_.parks.add();
    parker_.park(*ring_, park_timeout_ms());
    maintenance();
    if (leave_parked()) return;
  }
}

int Worker::park_timeout_ms() const {
  int timeout_ms = runtime_.config().park_timeout_ms;
  if (!engine_) return timeout_ms;
  auto wake_within = [&timeout_ms](std::chrono::milliseconds due) {
    const auto ms = static_cast<int>(due.count());
    timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
  };
  // Sockets waiting for credit get idle recvs' credit only from tick(): wake up for it.
  if (engine_->parked_sockets() > 0 && engine_->limits().socket_cap_bytes > 0) {
    wake_within(engine_->limits().dormant_after);
  }
  // Quiet recvs are looked at once (a lost wakeup): wake up for them too.
  if (engine_->has_quiet()) wake_within(engine_->limits().quiet_check_after);
  return timeout_ms;
}

void Worker::maintenance() {
  beat_if_due();
  if (control_pending_.load(std::memory_order_acquire)) run_control();
  drain_mailbox();
  // Submits what the tasks queued and, with DEFER_TASKRUN, runs the ring's pending task work so
  // the completions are there to reap.
  io_uring_submit_and_get_events(ring_->get());
  // At most one clock read a turn, and only if a completion needs the time; the turn's end looks
  // at quiet recvs and lends idle recvs' credit to sockets waiting for it
  // (RecvEngine::begin_turn()).
  if (engine_) engine_->begin_turn();
  reap();
  if (engine_) engine_->end_turn();
  flush_ready();
}

void Worker::reap() {
  ring_->drain([this](const io_uring_cqe& cqe) {
    counters_.io_completions.add();
    const std::uint64_t user_data = cqe.user_data;
    if (user_data == uring::kIgnoredUserData || user_data == 0) return;
    auto* completion = reinterpret_cast<Completion*>(static_cast<std::uintptr_t>(user_data));
    completion->on_cqe(completion, *this, cqe);
  });
}

void Worker::io_ready(TaskHeader* task) {
  ready_.push(task);
}

void Worker::flush_ready() {
  if (ready_.empty()) return;
  std::size_t backlog = 0;
  switch (runtime_.config().io_ready) {
    case IoReadyMode::inbox:
      inbox_.push_all(ready_);
      backlog = inbox_.len() + deque_.len() + run_list_.size();
      break;
    case IoReadyMode::index:
      // Only the empty -> non-empty transition lists the worker; while it stays listed, further
      // pushes need no index traffic.
      if (inbox_.push_all(ready_)) runtime_.index_.list(index_);
      backlog = inbox_.len() + deque_.len() + run_list_.size();
      break;
    case IoReadyMode::global:
      runtime_.global_.push_all(ready_);
      backlog = runtime_.global_.len();
      break;
  }
  // One ready task is this worker's next job; waking a sleeper for it would only make the two
  // race for it. More than one is work for others.
  if (!searching_ && backlog > 1) notify_parked();
}

void Worker::push_local(TaskHeader* task, bool notify) {
  if (!deque_.push(task)) runtime_.inject_.push(task);  // a full ring spills to the shared queue
  if (notify) notify_parked();
}

void Worker::run(TaskHeader* task) {
  // Found work, wherever (a steal, the shared queues after a wake): stop searching first. The
  // last searcher leaving hands the search on, so work queued behind this task is found too.
  if (searching_) {
    searching_ = false;
    if (runtime_.idle_.transition_from_searching()) notify_parked();
  }
  counters_.tasks_run.add();
  task->resume();
  // The task is suspended for good now; only here may it be handed to other threads.
  if (deferred_yield_ != nullptr) {
    push_local(std::exchange(deferred_yield_, nullptr), false);
  }
  if (deferred_request_ != nullptr) {
    std::exchange(deferred_home_, nullptr)->post_request(std::exchange(deferred_request_, nullptr));
  }
}

// ---- finding work ----

TaskHeader* Worker::pop_shared() {
  if (runtime_.config().io_ready == IoReadyMode::global) {
    if (TaskHeader* task = runtime_.global_.pop()) {
      counters_.global_queue_pops.add();
      return task;
    }
  }
  return runtime_.inject_.pop();
}

TaskHeader* Worker::next_local() {
  // Every so often the shared queues go first, so a worker that always has local work cannot
  // starve them.
  if (++tick_ % kSharedEvery == 0) {
    if (TaskHeader* task = pop_shared()) return task;
  }
  // Alternate between spawned/yielded tasks and I/O-ready ones so neither starves the other.
  prefer_deque_ = !prefer_deque_;
  if (prefer_deque_) {
    if (TaskHeader* task = deque_.pop()) return task;
  }
  if (run_list_.empty()) inbox_.pop_batch(kInboxBatch, run_list_);
  if (TaskHeader* task = run_list_.pop()) return task;
  if (TaskHeader* task = deque_.pop()) return task;
  return pop_shared();
}

TaskHeader* Worker::search() {
  if (!searching_) {
    if (!runtime_.idle_.transition_to_searching()) return nullptr;
    searching_ = true;
  }
  return steal_work();  // run() ends the search when this found something
}

TaskHeader* Worker::steal_work() {
  const std::uint32_t n = runtime_.worker_count();
  if (n > 1) {
    const std::uint32_t start = next_random() % n;
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint32_t victim = (start + i) % n;
      if (victim == index_) continue;
      std::uint32_t moved = 0;
      if (TaskHeader* task = runtime_.workers_[victim]->deque_.steal_into(deque_, moved)) {
        counters_.deque_steals.add();
        counters_.deque_stolen_tasks.add(moved);
        return task;
      }
    }
    switch (runtime_.config().io_ready) {
      case IoReadyMode::index:
        if (TaskHeader* task = steal_from_index()) return task;
        [[fallthrough]];  // the index is advisory: scanning stays the fallback
      case IoReadyMode::inbox:
        if (TaskHeader* task = scan_victim_inboxes()) return task;
        break;
      case IoReadyMode::global:
        break;  // inboxes stay empty in this mode
    }
  }
  return pop_shared();
}

TaskHeader* Worker::steal_from_index() {
  const std::uint32_t n = runtime_.worker_count();
  for (std::uint32_t attempt = 0; attempt < n; ++attempt) {
    std::optional<std::uint32_t> id = runtime_.index_.pop();
    if (!id) return nullptr;
    counters_.index_pops.add();
    Worker& victim = *runtime_.workers_[*id];
    TaskList batch;
    const std::size_t got = victim.inbox_.pop_batch(runtime_.config().index_drain, batch);
    if (got == 0) {
      counters_.index_stale_pops.add();
      continue;
    }
    // Work left behind keeps the victim findable.
    if (!victim.inbox_.empty()) runtime_.index_.list(*id);
    if (*id != index_) {
      counters_.inbox_steals.add();
      counters_.inbox_stolen_tasks.add(got);
    }
    return take_batch(batch);
  }
  return nullptr;
}

TaskHeader* Worker::scan_victim_inboxes() {
  const std::uint32_t n = runtime_.worker_count();
  const std::uint32_t start = next_random() % n;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t victim = (start + i) % n;
    if (victim == index_) continue;
    counters_.victim_inbox_attempts.add();
    if (TaskHeader* task = runtime_.workers_[victim]->inbox_.pop()) {
      counters_.inbox_steals.add();
      counters_.inbox_stolen_tasks.add();
      return task;
    }
  }
  return nullptr;
}

TaskHeader* Worker::take_batch(TaskList& batch) {
  TaskHeader* first = batch.pop();
  while (TaskHeader* task = batch.pop()) push_local(task, false);
  return first;
}

// ---- sleeping and waking ----

bool Worker::has_local_work() const {
  if (!run_list_.empty() || !ready_.empty() || !deque_.empty() || !inbox_.empty()) return true;
  if (!mailbox_.empty() || control_pending_.load(std::memory_order_acquire)) return true;
  // In global mode the global queue is every worker's own queue.
  return runtime_.config().io_ready == IoReadyMode::global && !runtime_.global_.empty();
}

bool Worker::enter_parked() {
  if (has_local_work()) return false;
  const bool last_searcher = runtime_.idle_.transition_to_parked(index_, searching_);
  searching_ = false;
  // Pushers skipped their wake while we searched; nobody else may be looking now.
  if (last_searcher) notify_if_work_pending();
  return true;
}

bool Worker::leave_parked() {
  if (has_local_work()) {
    // Woken by its own I/O or a home request: not a searcher, unless a notifier already took it
    // off the sleepers (and counted it as searching).
    searching_ = !runtime_.idle_.unpark_worker_by_id(index_);
    return true;
  }
  if (runtime_.idle_.is_parked(index_)) return false;  // timeout or spurious: sleep on
  searching_ = true;  // a gated wake: search for the work that caused it
  return true;
}

void Worker::notify_parked() {
  if (std::optional<std::uint32_t> id = runtime_.idle_.worker_to_notify()) {
    counters_.wakes.add();
    runtime_.workers_[*id]->parker_.unpark();
  }
}

void Worker::notify_if_work_pending() {
  for (const auto& worker : runtime_.workers_) {
    if (worker->has_stealable_work()) {
      notify_parked();
      return;
    }
  }
  if (!runtime_.global_.empty() || !runtime_.inject_.empty()) notify_parked();
}

void Worker::check_lost_wakeup() {
  // Only a bug can leave every worker asleep with work in a queue only workers push to
  // (deques, inboxes, the global queue); spawns from outside wake on their own.
  if (runtime_.idle_.unparked() != 0) return;
  bool queued = !runtime_.global_.empty();
  for (const auto& worker : runtime_.workers_) queued = queued || worker->has_stealable_work();
  if (queued) runtime_.lost_wakeups_.fetch_add(1, std::memory_order_relaxed);
}

void Worker::beat_if_due() {
  if (!beat_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_beat_ < kBeatEvery) return;
  last_beat_ = now;
  beat_();
}

std::uint32_t Worker::next_random() {
  // xorshift32: victims are picked in a different order per worker, reproducibly in step mode.
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 17;
  rng_ ^= rng_ << 5;
  return rng_;
}

// ---- requests from other threads ----

void Worker::post_request(HomeRequest* request) {
  mailbox_.push(request);
  parker_.unpark();
}

void Worker::drain_mailbox() {
  while (HomeRequest* request = mailbox_.pop()) request->run(request, *this);
}

void Worker::post_control(std::function<void(Worker&)> fn) {
  {
    std::lock_guard lock(control_mutex_);
    control_.push_back(std::move(fn));
    control_pending_.store(true, std::memory_order_release);
  }
  parker_.unpark();
}

void Worker::run_control() {
  std::vector<std::function<void(Worker&)>> work;
  {
    std::lock_guard lock(control_mutex_);
    work.swap(control_);
    control_pending_.store(false, std::memory_order_release);
  }
  for (auto& fn : work) {
    try {
      fn(*this);
    } catch (const std::exception& e) {
      log::error("{}: control request failed: {}", name_, e.what());
    }
  }
}

// ---- streams homed here ----

void Worker::link_stream(RecvStream* stream) {
  stream->list_prev_ = nullptr;
  stream->list_next_ = streams_head_;
  if (streams_head_ != nullptr) streams_head_->list_prev_ = stream;
  streams_head_ = stream;
  stream->linked_ = true;
  ++stream_count_;
}

void Worker::unlink_stream(RecvStream* stream) {
  if (!stream->linked_) return;
  if (stream->list_prev_ != nullptr) {
    stream->list_prev_->list_next_ = stream->list_next_;
  } else {
    streams_head_ = stream->list_next_;
  }
  if (stream->list_next_ != nullptr) stream->list_next_->list_prev_ = stream->list_prev_;
  stream->list_prev_ = stream->list_next_ = nullptr;
  stream->linked_ = false;
  --stream_count_;
}

std::size_t Worker::shutdown_streams(const void* owner) {
  std::size_t n = 0;
  for (RecvStream* s = streams_head_; s != nullptr; s = s->list_next_) {
    if (owner != nullptr && s->owner() != owner) continue;
    ::shutdown(s->fd(), SHUT_RDWR);
    ++n;
  }
  return n;
}

}  // namespace ferry::runtime
