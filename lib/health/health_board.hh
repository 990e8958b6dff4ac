// Which backends are up, as their health checks last saw them. The checker writes, the proxy's
// workers and the UDP fast path read: a backend's flag has a stable address, read lock-free.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "lib/common/net.hh"

namespace ferry::health {

// One backend of one service. `up` starts true: a backend without checks is always up, and a
// checked backend is trusted until its checks have failed `fall` times.
struct BackendState {
  std::atomic<bool> up{true};
  std::atomic<bool> checked{false};  // a health check runs for it
  // A check of it has passed since it was configured: what announcing waits for, so a host does
  // not attract traffic for backends it has not reached yet.
  std::atomic<bool> passed{false};
};

// Called on the checker's thread after a backend's `up` flag changed.
using TransitionListener =
    std::function<void(const std::string& service, const net::Endpoint& backend, bool up)>;
// Called on the checker's thread when a backend's first check passes.
using FirstPassListener =
    std::function<void(const std::string& service, const net::Endpoint& backend)>;

class HealthBoard {
 public:
  HealthBoard() = default;
  HealthBoard(const HealthBoard&) = delete;
  HealthBoard& operator=(const HealthBoard&) = delete;

  // The state of `backend` in `service`, created (up) on first use. Callers keep the pointer and
  // read state->up.load(std::memory_order_relaxed) per decision; it stays valid while they hold it.
  std::shared_ptr<const BackendState> state(const std::string& service,
                                            const net::Endpoint& backend);
  // Writer side (the checker, or a test): sets the flag and tells the listeners if it changed.
  // Returns whether it changed.
  bool set_up(const std::string& service, const net::Endpoint& backend, bool up);
  void set_checked(const std::string& service, const net::Endpoint& backend, bool checked);
  // A check passed: sets `passed` and, the first time, tells the first-pass listeners.
  void set_passed(const std::string& service, const net::Endpoint& backend);
  // Listeners cannot be removed; register them before the checker starts.
  void subscribe(TransitionListener listener);
  void subscribe_first_pass(FirstPassListener listener);
  // Drops backends that are no longer configured (holders keep their pointers alive).
  void retain(const std::vector<std::pair<std::string, net::Endpoint>>& configured);
  // Every known backend with its current flag, for status and metrics.
  struct Entry {
    std::string service;
    net::Endpoint backend;
    bool up = true;
    bool checked = false;
  };
  std::vector<Entry> snapshot() const;

 private:
  std::shared_ptr<BackendState> find_or_add(const std::string& service,
                                            const net::Endpoint& backend);

  mutable std::mutex mutex_;
  std::map<std::pair<std::string, net::Endpoint>, std::shared_ptr<BackendState>> states_;
  std::map<std::pair<std::string, net::Endpoint>, net::Endpoint> endpoints_;
  std::vector<TransitionListener> listeners_;
  std::vector<FirstPassListener> first_pass_listeners_;
};

}  // namespace ferry::health
