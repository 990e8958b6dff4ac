// Liveness of the daemon's threads: each thread beats its own slot (a relaxed store, no lock);
// the supervisor pings the systemd watchdog only while every enrolled thread is beating.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ferry::lifecycle {

class Heartbeat {
 public:
  Heartbeat(std::string name, std::string kind);
  void beat() noexcept;
  const std::string& name() const { return name_; }
  const std::string& kind() const { return kind_; }
  std::chrono::nanoseconds age(std::chrono::steady_clock::time_point now) const;

 private:
  std::string name_;
  std::string kind_;
  std::atomic<std::int64_t> last_beat_ns_;
};

struct HeartbeatView {
  std::string name;
  std::string kind;
  std::chrono::milliseconds age;
  bool alive;
};

class HeartbeatBoard {
 public:
  // The thread keeps the shared_ptr and beats it; dropping it withdraws the thread.
  std::shared_ptr<Heartbeat> enroll(std::string name, std::string kind);
  std::vector<HeartbeatView> inspect(std::chrono::milliseconds stale_after) const;
  // Names of enrolled threads that have not beaten within `stale_after`.
  std::vector<std::string> stalled(std::chrono::milliseconds stale_after) const;

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::shared_ptr<Heartbeat>> entries_;
};

}  // namespace ferry::lifecycle
