// Active backend health checks: one thread with an epoll loop that runs one non-blocking check
// (check.hh: tcp, udp, dns or http) per checked backend each interval and turns rise/fall streaks
// into HealthBoard transitions.
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
#include "lib/health/check.hh"
#include "lib/health/health_board.hh"
#include "lib/health/tunnel_marks.hh"

namespace ferry::health {

// One backend of one service, and how to check it.
struct CheckTarget {
  std::string service;
  net::Endpoint backend;
  config::HealthCheckConfig params;
  std::optional<TunnelRoute> tunnel;  // an encapsulating service's: checked through the tunnel
  bool operator==(const CheckTarget&) const = default;
};

// Every backend of every proxy-mode service that has a `health` object, checked as its `type`
// says (a UDP-only service may keep the default tcp check; see docs/health.md). With `marks`, a
// backend of an encapsulating service is checked through its tunnel (the VIP, with its mark).
std::vector<CheckTarget> check_targets(std::span<const config::ServiceConfig> services,
                                       const TunnelMarks* marks = nullptr);
// Every (service, backend) pair the config names, for HealthBoard::retain.
std::vector<std::pair<std::string, net::Endpoint>> configured_backends(
    std::span<const config::ServiceConfig> services);

// Upper bounds (seconds) of ferry_health_check_duration_seconds; a timeout lands near its
// timeout_ms, beyond the last bound in +Inf.
inline constexpr std::array<double, 14> kCheckDurationBounds = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

// What status and metrics show of one checked backend.
struct BackendHealth {
  std::string service;
  net::Endpoint backend;
  bool up = true;  // as on the board: whether traffic may go to it
  std::uint32_t consecutive_failures = 0;
  std::uint32_t consecutive_successes = 0;
  config::HealthCheckType type = config::HealthCheckType::tcp;
  // Where its checks connect: the backend's address and port (or `port`), or for an
  // encapsulating service the VIP, through the tunnel its mark names.
  net::Endpoint target;
  std::optional<std::uint32_t> tunnel_mark;
  std::optional<std::string> last_error;  // reason of the last failed check, kept after recovery
  std::optional<CheckResult> last_result;
  std::string last_reason;  // of the last check: "connected", "status 503", "rcode SERVFAIL"
  std::optional<std::chrono::steady_clock::time_point> last_check_at;
  double last_connect_ms = 0;                         // duration of the last successful check
  std::array<std::uint64_t, kCheckResults> checks{};  // by CheckResult
  // Durations of every finished check: counts per kCheckDurationBounds bucket (not cumulative;
  // the last one is +Inf), their sum in seconds.
  std::array<std::uint64_t, kCheckDurationBounds.size() + 1> duration_buckets{};
  double duration_sum_seconds = 0;
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
  void resume(Probe& probe, std::uint32_t events, std::chrono::steady_clock::time_point now);
  void finish(Probe& probe, CheckResult result, std::string reason,
              std::chrono::steady_clock::time_point now);
  std::uint64_t random_below(std::uint64_t bound);
  // `interval` spread by up to 10% either way.
  std::chrono::milliseconds jittered(std::chrono::milliseconds interval);
  void publish(const Probe& probe);
  // Sets the probe's view of its type and of where its checks go.
  void describe_target(Probe& probe);

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
