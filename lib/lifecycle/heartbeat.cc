// Liveness of the daemon's threads, read by the supervisor for the systemd watchdog.
#include "lib/lifecycle/heartbeat.hh"

#include <algorithm>

namespace ferry::lifecycle {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Heartbeat::Heartbeat(std::string name, std::string kind)
    : name_(std::move(name)), kind_(std::move(kind)), last_beat_ns_(now_ns()) {}

void Heartbeat::beat() noexcept { last_beat_ns_.store(now_ns(), std::memory_order_relaxed); }

std::chrono::nanoseconds Heartbeat::age(std::chrono::steady_clock::time_point now) const {
  auto now_count = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  return std::chrono::nanoseconds(std::max<std::int64_t>(
      0, now_count - last_beat_ns_.load(std::memory_order_relaxed)));
}

std::shared_ptr<Heartbeat> HeartbeatBoard::enroll(std::string name, std::string kind) {
  auto entry = std::make_shared<Heartbeat>(std::move(name), std::move(kind));
  std::lock_guard lock(mutex_);
  entries_.push_back(entry);
  return entry;
}

std::vector<HeartbeatView> HeartbeatBoard::inspect(std::chrono::milliseconds stale_after) const {
  auto now = std::chrono::steady_clock::now();
  std::lock_guard lock(mutex_);
  // Entries only the board still holds belong to threads that have exited cleanly.
  std::erase_if(entries_, [](const auto& e) { return e.use_count() == 1; });
  std::vector<HeartbeatView> views;
  for (const auto& e : entries_) {
    auto age = std::chrono::duration_cast<std::chrono::milliseconds>(e->age(now));
    views.push_back({e->name(), e->kind(), age, age <= stale_after});
  }
  return views;
}

std::vector<std::string> HeartbeatBoard::stalled(std::chrono::milliseconds stale_after) const {
  std::vector<std::string> names;
  for (const auto& v : inspect(stale_after)) {
    if (!v.alive) names.push_back(v.name);
  }
  return names;
}

}  // namespace ferry::lifecycle
