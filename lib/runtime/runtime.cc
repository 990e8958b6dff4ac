// The TCP runtime: workers, shared queues, spawning and the task frames it owns (see runtime.hh).
#include "lib/runtime/runtime.hh"

#include <pthread.h>

#include <cstdlib>
#include <future>
#include <stdexcept>
#include <string>

#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"
#include "lib/uring/recv_counters.hh"

namespace ferry::runtime {
std::string_view to_string(IoReadyMode mode) {
  switch (mode) {
    case IoReadyMode::inbox:
      return "inbox";
    case IoReadyMode::global:
      return "global";
    case IoReadyMode::index:
      return "index";
  }
  return "inbox";
}

IoReadyMode io_ready_with_env(IoReadyMode configured, EnvLookup lookup) {
  lookup = env_or_process(lookup);
  const bool global = env_flag("FERRY_TASK_GLOBAL_IO_READY", lookup);
  const bool index = env_flag("FERRY_TASK_IO_READY_INDEX", lookup);
  if (global && index) {
    throw std::invalid_argument(
        "FERRY_TASK_GLOBAL_IO_READY and FERRY_TASK_IO_READY_INDEX are both set: unset one (or "
        "use tcp.scheduler.io_ready)");
  }
  if (global) return IoReadyMode::global;
  if (index) return IoReadyMode::index;
  return configured;
}

std::uint32_t index_drain_with_env(std::uint32_t configured, EnvLookup lookup) {
  lookup = env_or_process(lookup);
  const char* value = lookup("FERRY_TASK_INDEX_DRAIN");
  if (value == nullptr || *value == '\0') return configured;
  char* end = nullptr;
  const unsigned long n = std::strtoul(value, &end, 10);
  if (*end != '\0' || n < 1 || n > 64) {
    throw std::invalid_argument(std::string("FERRY_TASK_INDEX_DRAIN=") + value +
                                ": expected a number of tasks from 1 to 64");
  }
  return static_cast<std::uint32_t>(n);
}

Task::promise_type::~promise_type() {
  if (header.runtime != nullptr) header.runtime->forget(&header);
}

Runtime::Runtime(RuntimeConfig config)
    : config_(std::move(config)),
      idle_(config_.workers == 0 ? 1 : config_.workers),
      index_(config_.workers == 0 ? 1 : config_.workers) {
  if (config_.workers == 0 || config_.workers > 1024) {
    throw std::invalid_argument("runtime: workers must be 1..1024, not " +
                                std::to_string(config_.workers));
  }
  if (config_.index_drain == 0) config_.index_drain = 1;
  workers_.reserve(config_.workers);
  for (std::uint32_t i = 0; i < config_.workers; ++i) {
    workers_.push_back(std::make_unique<Worker>(*this, i));
  }
}

Runtime::~Runtime() {
  stop();
  // Frames of tasks that never finished (suspended on I/O at stop, or still queued). Their
  // destructors may touch their home worker's stream list: the workers still exist.
  std::vector<TaskHeader*> leftover;
  {
    std::lock_guard lock(live_mutex_);
    tearing_down_ = true;
    for (TaskHeader* t = live_head_; t != nullptr; t = t->live_next) leftover.push_back(t);
  }
  for (TaskHeader* t : leftover) t->handle.destroy();
  workers_.clear();
}

void Runtime::start() {
  if (started_) throw std::logic_error("runtime: start() called twice");
  started_ = true;
  if (config_.heartbeat) {
    for (auto& worker : workers_) worker->beat_ = config_.heartbeat(worker->name());
  }
  if (config_.step_mode) {
    try {
      for (auto& worker : workers_) worker->setup_io();
    } catch (...) {
      for (auto& worker : workers_) worker->teardown_io();
      stopped_ = true;
      throw;
    }
    return;
  }
  std::vector<std::promise<void>> ready(workers_.size());
  std::vector<std::future<void>> setups;
  for (auto& p : ready) setups.push_back(p.get_future());
  threads_.reserve(workers_.size());
  for (std::uint32_t i = 0; i < workers_.size(); ++i) {
    threads_.emplace_back([this, i, promise = &ready[i]] {
      Worker& worker = *workers_[i];
      // "tcp-0" in top -H, ps -L and /proc/PID/task/*/comm (15 characters at most).
      pthread_setname_np(pthread_self(), worker.name().substr(0, 15).c_str());
      try {
        worker.setup_io();
      } catch (...) {
        worker.teardown_io();
        promise->set_exception(std::current_exception());
        return;
      }
      promise->set_value();
      // A task that threw may hold a connection half moved: stop ferryd in order.
      if (run_guarded(worker.name(), [&worker] { worker.run_loop(); })) {
        request_fatal_stop(worker.name(), "its tasks and connections are no longer served");
      }
      worker.teardown_io();
    });
  }
  std::exception_ptr failure;
  for (auto& f : setups) {
    try {
      f.get();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) {
    stop();
    std::rethrow_exception(failure);
  }
}

void Runtime::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  stopping_.store(true, std::memory_order_release);
  if (config_.step_mode) {
    for (auto& worker : workers_) worker->teardown_io();
    return;
  }
  for (auto& worker : workers_) worker->unpark();
  for (auto& thread : threads_) {
    if (thread.joinable()) thread.join();
  }
  threads_.clear();
}

void Runtime::adopt(TaskHeader* task) {
  task->runtime = this;
  std::lock_guard lock(live_mutex_);
  task->live_prev = nullptr;
  task->live_next = live_head_;
  if (live_head_ != nullptr) live_head_->live_prev = task;
  live_head_ = task;
  ++live_count_;
}

void Runtime::forget(TaskHeader* task) {
  std::lock_guard lock(live_mutex_);
  if (task->live_prev != nullptr) {
    task->live_prev->live_next = task->live_next;
  } else {
    live_head_ = task->live_next;
  }
  if (task->live_next != nullptr) task->live_next->live_prev = task->live_prev;
  --live_count_;
}

std::size_t Runtime::live_tasks() const {
  std::lock_guard lock(live_mutex_);
  return live_count_;
}

void Runtime::spawn(Task task) {
  TaskHeader* header = task.release();
  adopt(header);
  Worker* here = current_worker();
  if (here != nullptr && &here->runtime() == this) {
    here->push_local(header, /*notify=*/true);
    return;
  }
  inject_.push(header);
  if (std::optional<std::uint32_t> id = idle_.worker_to_notify()) workers_[*id]->unpark();
}

void Runtime::spawn_on(std::uint32_t worker, Task task) {
  TaskHeader* header = task.release();
  adopt(header);
  workers_.at(worker)->push_local(header, /*notify=*/false);
}

void Runtime::post(std::uint32_t worker, std::function<void(Worker&)> fn) {
  workers_.at(worker)->post_control(std::move(fn));
}

Worker::StepResult Runtime::step(std::uint32_t worker) {
  if (!config_.step_mode) throw std::logic_error("runtime: step() needs step_mode");
  return workers_.at(worker)->step();
}

Worker::StepResult Runtime::run_one(std::uint32_t worker) {
  if (!config_.step_mode) throw std::logic_error("runtime: run_one() needs step_mode");
  return workers_.at(worker)->step(/*poll=*/false);
}

void Runtime::poll(std::uint32_t worker) {
  if (!config_.step_mode) throw std::logic_error("runtime: poll() needs step_mode");
  workers_.at(worker)->poll();
}

nlohmann::json Runtime::workers_json() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& worker : workers_) out.push_back(to_json(worker->name(), worker->counters()));
  return out;
}

std::vector<metrics::Registry::Handle> Runtime::register_metrics(metrics::Registry& registry) {
  std::vector<metrics::Registry::Handle> handles;
  handles.push_back(registry.add([this](metrics::SnapshotBuilder& out) {
    for (const auto& worker : workers_) collect(out, worker->name(), worker->counters());
  }));
  for (const auto& worker : workers_) {
    if (worker->buffers_ == nullptr) continue;
    handles.push_back(uring::register_recv_metrics(registry, worker->name(),
                                                   worker->recv_counters(), *worker->buffers_));
  }
  return handles;
}

}  // namespace ferry::runtime
