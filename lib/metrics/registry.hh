// The one metrics registry: collectors read their owners' counters into a snapshot, and the
// same snapshot feeds `ferryctl stats`, the JSON control protocol and the Prometheus endpoint.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace ferry::metrics {

// A counter with exactly one writer thread. The writer adds with a relaxed load + store (no
// read-modify-write, no lock); any thread may read a possibly slightly stale value.
class Counter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

// A gauge with exactly one writer thread.
class Gauge {
 public:
  void set(std::int64_t v) noexcept { value_.store(v, std::memory_order_relaxed); }
  void add(std::int64_t n) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::int64_t value() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::int64_t> value_{0};
};

enum class Type { counter, gauge, histogram };

using Labels = std::vector<std::pair<std::string, std::string>>;

struct HistogramValue {
  // Cumulative counts per upper bound, ascending; the +Inf bucket is `count`.
  std::vector<std::pair<double, std::uint64_t>> buckets;
  double sum = 0;
  std::uint64_t count = 0;
};

struct Sample {
  Labels labels;
  double value = 0;          // counter and gauge
  HistogramValue histogram;  // histogram only
};

struct Family {
  std::string name;  // full name, "ferry_" prefix, counters end in "_total"
  std::string help;
  Type type = Type::counter;
  std::vector<Sample> samples;
};

// A point-in-time copy of every family, sorted by name.
using Snapshot = std::vector<Family>;

// Builds a snapshot; families with the same name from several collectors are merged.
class SnapshotBuilder {
 public:
  void counter(const std::string& name, const std::string& help, Labels labels, double value);
  void gauge(const std::string& name, const std::string& help, Labels labels, double value);
  void histogram(const std::string& name, const std::string& help, Labels labels,
                 HistogramValue value);
  // Declares a family even when it has no samples yet, so HELP/TYPE are always present.
  void declare(const std::string& name, const std::string& help, Type type);
  Snapshot finish() &&;

 private:
  Family& family(const std::string& name, const std::string& help, Type type);
  Snapshot families_;
};

// Called on the control thread at every snapshot; reads counters, never blocks their writers.
using Collector = std::function<void(SnapshotBuilder&)>;

class Registry {
 public:
  class Handle;  // removes its collector when destroyed

  // Collectors may be added and removed from any thread (control plane, not the hot path).
  [[nodiscard]] Handle add(Collector collector);
  Snapshot snapshot() const;

 private:
  void remove(std::uint64_t id);
  mutable std::mutex mutex_;
  std::uint64_t next_id_ = 1;
  std::vector<std::pair<std::uint64_t, Collector>> collectors_;
};

class Registry::Handle {
 public:
  Handle() = default;
  Handle(Registry* registry, std::uint64_t id) : registry_(registry), id_(id) {}
  Handle(Handle&& o) noexcept : registry_(std::exchange(o.registry_, nullptr)), id_(o.id_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      registry_ = std::exchange(o.registry_, nullptr);
      id_ = o.id_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  void reset() {
    if (registry_) std::exchange(registry_, nullptr)->remove(id_);
  }

 private:
  Registry* registry_ = nullptr;
  std::uint64_t id_ = 0;
};

}  // namespace ferry::metrics
