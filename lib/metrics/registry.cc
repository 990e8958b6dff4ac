// The one metrics registry: collectors read their owners' counters into a snapshot, and the
// same snapshot feeds `ferryctl stats`, the JSON control protocol and the Prometheus endpoint.
#include "lib/metrics/registry.hh"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "lib/metrics/names.hh"

namespace ferry::metrics {
namespace {

void check_buckets(const std::string& name, const HistogramValue& value) {
  for (std::size_t i = 0; i < value.buckets.size(); ++i) {
    double bound = value.buckets[i].first;
    // The +Inf bucket is implied by `count`; an explicit one would be printed twice.
    if (!std::isfinite(bound)) {
      throw std::logic_error(
          fmt::format("histogram '{}': bucket bound {} is not finite", name, bound));
    }
    if (i > 0 && !(value.buckets[i - 1].first < bound)) {
      throw std::logic_error(
          fmt::format("histogram '{}': bucket bounds must be strictly ascending", name));
    }
  }
}

}  // namespace

Family& SnapshotBuilder::family(const std::string& name, const std::string& help, Type type) {
  // Collectors tend to emit one family's samples together, so the match is usually near the end.
  for (auto it = families_.rbegin(); it != families_.rend(); ++it) {
    if (it->name != name) continue;
    if (it->type != type || it->help != help) {
      // Two collectors disagree about one family: a programming error. Debug builds stop here;
      // release builds keep the first declaration (and drop samples of the wrong type).
#ifndef NDEBUG
      std::fprintf(stderr, "metric family '%s' declared twice with different type or help\n",
                   name.c_str());
      std::abort();
#endif
    }
    return *it;
  }
  check_family_name(name, type);
  families_.push_back(Family{name, help, type, {}});
  return families_.back();
}

void SnapshotBuilder::counter(const std::string& name, const std::string& help, Labels labels,
                              double value) {
  Family& f = family(name, help, Type::counter);
  if (f.type != Type::counter) return;
  check_labels(name, labels, Type::counter);
  f.samples.push_back(Sample{std::move(labels), value, {}});
}

void SnapshotBuilder::gauge(const std::string& name, const std::string& help, Labels labels,
                            double value) {
  Family& f = family(name, help, Type::gauge);
  if (f.type != Type::gauge) return;
  check_labels(name, labels, Type::gauge);
  f.samples.push_back(Sample{std::move(labels), value, {}});
}

void SnapshotBuilder::histogram(const std::string& name, const std::string& help, Labels labels,
                                HistogramValue value) {
  Family& f = family(name, help, Type::histogram);
  if (f.type != Type::histogram) return;
  check_labels(name, labels, Type::histogram);
  check_buckets(name, value);
  f.samples.push_back(Sample{std::move(labels), 0, std::move(value)});
}

void SnapshotBuilder::declare(const std::string& name, const std::string& help, Type type) {
  family(name, help, type);
}

Snapshot SnapshotBuilder::finish() && {
  // Stable: equal names cannot occur (they were merged), but keep the order deterministic anyway.
  std::stable_sort(families_.begin(), families_.end(),
                   [](const Family& a, const Family& b) { return a.name < b.name; });
  return std::move(families_);
}

Registry::Handle Registry::add(Collector collector) {
  std::lock_guard lock(mutex_);
  std::uint64_t id = next_id_++;
  collectors_.emplace_back(id, std::move(collector));
  return Handle(this, id);
}

void Registry::remove(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  std::erase_if(collectors_, [id](const auto& entry) { return entry.first == id; });
}

Snapshot Registry::snapshot() const {
  SnapshotBuilder builder;
  {
    // Collectors run under the lock so that once remove() returns, the collector (and whatever it
    // captured) is never called again. Hence a collector must not add or remove collectors.
    std::lock_guard lock(mutex_);
    for (const auto& [id, collect] : collectors_) collect(builder);
  }
  return std::move(builder).finish();
}

}  // namespace ferry::metrics
