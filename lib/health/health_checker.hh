// Active backend health checks: one thread with an epoll loop that opens a non-blocking TCP
// connection to every checked backend each interval and turns rise/fall streaks into HealthBoard
// transitions.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/config/config.hh"
#include "lib/health/health_board.hh"

namespace ferry::health {

// One backend of one service, and how to check it.
struct CheckTarget {
  std::string service;
  net::Endpoint backend;
  config::HealthCheckConfig params;
  bool operator==(const CheckTarget&) const = default;
};

// Every backend of every proxy-mode service that has a `health` object. UDP-only services are
// checked by TCP connect to the same address and port too (see docs/health.md).
std::vector<CheckTarget> check_targets(std::span<const config::ServiceConfig> services);
// Every (service, backend) pair the config names, for HealthBoard::retain.
std::vector<std::pair<std::string, net::Endpoint>> configured_backends(
    std::span<const config::ServiceConfig> services);

// How one check ended; the values of the `result` label of ferry_health_checks_total.
enum class CheckResult : std::uint8_t { ok, refused, timeout, error };
inline constexpr std::size_t kCheckResults = 4;
std::string_view to_string(CheckResult result);

// What status and metrics show of one checked backend.
struct BackendHealth {
  std::string service;
  net::Endpoint backend;
  bool up = true;                        // as on the board: whether traffic may go to it
  std::uint32_t consecutive_failures = 0;
  std::uint32_t consecutive_successes = 0;
  std::optional<std::string> last_error;  // reason of the last failed check, kept after recovery
  std::optional<std::chrono::steady_clock::time_point> last_check_at;
  double last_connect_ms = 0;  // duration of the last successful connect
  std::array<std::uint64_t, kCheckResults> checks{};  // by CheckResult
  std::uint64_t went_up = 0;
  std::uint64_t went_down = 0;
};

struct HealthCheckerOptions {
  // Called by the checker's thread on every loop turn, at least once a second.
  std::function<void()> heartbeat;
  // Seeds the jitter; 0 takes a random seed.
  std::uint64_t jitter_seed = 0;
};

class HealthChecker {
 public:
  // Throws std::system_error when the epoll or eventfd cannot be created.
  explicit HealthChecker(HealthBoard& board, HealthCheckerOptions options = {});
  // Stops the thread; every check socket is closed.
  ~HealthChecker();
  HealthChecker(const HealthChecker&) = delete;
  HealthChecker& operator=(const HealthChecker&) = delete;

  void start();
  void stop() noexcept;

  // Replaces the set of checked backends and returns once the checker has taken it: a backend
  // whose (service, backend) stays keeps its streaks and counters (new params apply from its next
  // check); a new one starts up and is first checked at a random point of its first interval; a
  // dropped one is marked unchecked and up on the board (so it serves again if still configured).
  // Call HealthBoard::retain after this, not before. Any thread but the checker's (and not from
  // a board listener).
  void set_targets(std::vector<CheckTarget> targets);

  // Every checked backend, ordered by (service, backend); health_report.hh turns it into status
  // and metrics.
  std::vector<BackendHealth> snapshot() const;

 private:
  struct Probe;
  using Key = std::pair<std::string, std::string>;  // (service, backend text)

  void run();
  void apply_targets(std::vector<CheckTarget> targets);
  void launch(Probe& probe, std::chrono::steady_clock::time_point now);
  void finish(Probe& probe, CheckResult result, std::string error,
              std::chrono::steady_clock::time_point now);
  std::uint64_t random_below(std::uint64_t bound);
  // `interval` spread by up to 10% either way.
  std::chrono::milliseconds jittered(std::chrono::milliseconds interval);
  void publish(const Probe& probe);

  HealthBoard& board_;
  HealthCheckerOptions options_;
  UniqueFd epoll_fd_;
  UniqueFd wake_fd_;
  std::thread thread_;
  std::uint64_t rng_state_;

  // Owned by the checker's thread (or the caller's before start()).
  std::map<Key, std::unique_ptr<Probe>> probes_;
  std::map<std::uint64_t, Probe*> by_token_;  // epoll data -> probe with a check in flight
  std::uint64_t next_token_ = 1;

  // Handing targets and stop to the thread.
  std::mutex control_mutex_;
  std::condition_variable applied_;
  std::optional<std::vector<CheckTarget>> pending_;
  std::uint64_t requested_ = 0;  // set_targets calls so far
  std::uint64_t taken_ = 0;      // of which the thread has applied
  bool stop_ = false;
  bool running_ = false;
  bool exited_ = false;  // the thread left its loop (stopped, or epoll failed)

  // What snapshot() and collect() read.
  mutable std::mutex views_mutex_;
  std::map<Key, BackendHealth> views_;
};

}  // namespace ferry::health
