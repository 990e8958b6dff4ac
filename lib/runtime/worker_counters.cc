// Per-worker scheduler counters as JSON and as metric families (see worker_counters.hh).
#include "lib/runtime/worker_counters.hh"

#include <array>

namespace ferry::runtime {
namespace {

struct Field {
  const char* key;  // JSON key; the metric is ferry_runtime_<key>_total
  metrics::Counter WorkerCounters::*counter;
  const char* help;
};

constexpr std::array<Field, 13> kFields = {{
    {"tasks_run", &WorkerCounters::tasks_run, "Tasks resumed by the TCP runtime worker."},
    {"deque_steals", &WorkerCounters::deque_steals,
     "Batch steals from other workers' local run queues."},
    {"deque_stolen_tasks", &WorkerCounters::deque_stolen_tasks,
     "Tasks moved by batch steals from other workers' local run queues."},
    {"inbox_steals", &WorkerCounters::inbox_steals,
     "Successful takes from other workers' I/O inboxes."},
    {"inbox_stolen_tasks", &WorkerCounters::inbox_stolen_tasks,
     "Tasks moved out of other workers' I/O inboxes."},
    {"victim_inbox_attempts", &WorkerCounters::victim_inbox_attempts,
     "Other workers' I/O inboxes looked at while searching for work."},
    {"index_pops", &WorkerCounters::index_pops, "Worker ids popped from the ready-worker index."},
    {"index_stale_pops", &WorkerCounters::index_stale_pops,
     "Ready-worker index pops whose inbox was already empty."},
    {"parks", &WorkerCounters::parks, "Times the worker went to sleep."},
    {"wakes", &WorkerCounters::wakes, "Parked workers this worker woke because work appeared."},
    {"global_queue_pops", &WorkerCounters::global_queue_pops,
     "Tasks taken from the global I/O-ready queue (io_ready=global)."},
    {"home_requests", &WorkerCounters::home_requests,
     "Requests posted to another worker's mailbox (receive and buffer work of its sockets)."},
    {"io_completions", &WorkerCounters::io_completions,
     "io_uring completions reaped by the worker."},
}};

}  // namespace

nlohmann::json to_json(const std::string& worker, const WorkerCounters& counters) {
  nlohmann::json out = {{"worker", worker}};
  for (const Field& f : kFields) out[f.key] = (counters.*f.counter).value();
  return out;
}

void collect(metrics::SnapshotBuilder& out, const std::string& worker,
             const WorkerCounters& counters) {
  for (const Field& f : kFields) {
    out.counter(std::string("ferry_runtime_") + f.key + "_total", f.help, {{"worker", worker}},
                static_cast<double>((counters.*f.counter).value()));
  }
}

}  // namespace ferry::runtime
