// Per-worker scheduler counters: single-writer words the worker bumps, read by the metrics
// collector and `ferryctl workers` on the control thread without stopping the worker.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "lib/metrics/registry.hh"

namespace ferry::runtime {

struct alignas(64) WorkerCounters {
  metrics::Counter tasks_run;              // task resumptions on this worker
  metrics::Counter deque_steals;           // successful batch steals from other workers' deques
  metrics::Counter deque_stolen_tasks;     // tasks those steals moved
  metrics::Counter inbox_steals;           // successful takes from other workers' I/O inboxes
  metrics::Counter inbox_stolen_tasks;     // tasks those takes moved
  metrics::Counter victim_inbox_attempts;  // other workers' inboxes looked at while searching
  metrics::Counter index_pops;             // ids popped from the ready-worker index
  metrics::Counter index_stale_pops;       // ... whose inbox was already empty
  metrics::Counter parks;                  // times the worker went to sleep
  metrics::Counter wakes;                  // parked workers this worker woke (gated wakes)
  metrics::Counter global_queue_pops;      // tasks taken from the global I/O queue
  metrics::Counter home_requests;          // requests posted to another worker's mailbox
  metrics::Counter io_completions;         // CQEs reaped from this worker's ring
};

// {"worker":"tcp-0","tasks_run":..,"deque_steals":..,...}
nlohmann::json to_json(const std::string& worker, const WorkerCounters& counters);

// Adds every counter to `out` as ferry_runtime_<name>_total{worker=...}.
void collect(metrics::SnapshotBuilder& out, const std::string& worker,
             const WorkerCounters& counters);

}  // namespace ferry::runtime
