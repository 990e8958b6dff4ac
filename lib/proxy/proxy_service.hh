// A TCP service in mode proxy: its listeners (one multishot accept per worker), its admission
// limits, its current backend generation, the registry of its open connections (for the idle
// sweep, the drain and stop), and its metrics.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/config/config.hh"
#include "lib/health/health_board.hh"
#include "lib/proxy/backend_pool.hh"
#include "lib/proxy/proxy_counters.hh"
#include "lib/tcp/tcp_service.hh"

namespace ferry::proxy {

struct Session;

// The tcp.proxy values and the service's own cap, as one connection sees them for its life.
struct ProxySettings {
  std::uint32_t connect_timeout_ms = 2000;
  std::uint32_t connect_attempts = 3;
  std::uint32_t idle_timeout_ms = 300000;  // 0: off
  std::uint32_t drain_timeout_ms = 10000;
  std::uint32_t high_water_bytes = 1048576;
  std::uint32_t low_water_bytes = 65536;
  std::uint32_t max_connections = 0;                               // this service; 0: no cap
  config::ProxyProtocol send_header = config::ProxyProtocol::off;  // towards the backend
  bool accept_header = false;  // the client starts with a PROXY protocol header
  static ProxySettings from(const config::ProxyConfig& proxy, const config::ServiceConfig& service);
};

// What new connections use; a reload swaps in a new one, open connections keep theirs.
struct Generation {
  std::shared_ptr<BackendPool> pool;
  ProxySettings settings;
};

// The cap over every proxy service of a plane (tcp.proxy.max_connections).
struct ProxyShared {
  std::atomic<std::int64_t> active{0};
  std::atomic<std::int64_t> max_connections{65536};
};

// Makes `fd` send RST and wakes everything waiting on it (connect(AF_UNSPEC): an abortive
// disconnect); the fd stays open for its owner to close.
void abort_socket(int fd);

class ProxyService final : public tcp::ListeningService,
                           public std::enable_shared_from_this<ProxyService> {
 public:
  // `health` may be null (every backend up). Throws std::invalid_argument on a service the proxy
  // cannot serve (no backends).
  ProxyService(const config::ServiceConfig& service, const config::ProxyConfig& proxy,
               tcp::ListenerMode mode, std::uint32_t workers, bool multishot_accept,
               tcp::SessionTracker& sessions, ProxyShared& shared, health::HealthBoard* health);
  ~ProxyService() override;
  ProxyService(const ProxyService&) = delete;
  ProxyService& operator=(const ProxyService&) = delete;

  // Control thread, on reload: new connections use the new backends, balance and settings.
  void update(const config::ServiceConfig& service, const config::ProxyConfig& proxy);

  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "proxy"; }
  // Starts the drain: connections get drain_timeout_ms, then the sweep resets them.
  void end_connections(runtime::Runtime& runtime) override;
  std::int64_t open_connections() const override {
    return counters_.active.load(std::memory_order_relaxed);
  }
  void collect(metrics::SnapshotBuilder& out) const override;
  nlohmann::json status() const override;

  // The sweeper's periodic pass: resets idle connections, and every connection once a drain's
  // deadline passed. False once the service drained and has no connection left.
  bool sweep(std::chrono::steady_clock::time_point now);
  // Resets every open connection now (stop after its grace).
  void reset_all();
  // How often sweep() should run for the idle timeout to be honoured within an eighth of it.
  std::chrono::milliseconds sweep_interval() const;
  bool draining() const { return draining_.load(std::memory_order_acquire); }

  // --- for the sessions (any worker) ---
  std::shared_ptr<const Generation> generation() const;
  ServiceCounters& counters() { return counters_; }
  ProxyShared& shared() { return shared_; }
  tcp::SessionTracker& sessions() { return sessions_; }
  void link(Session& session);
  void unlink(Session& session);
  void set_backend_fd(Session& session, int fd);  // under the registry lock: the sweep aborts it

  void accepted(runtime::Worker& worker, UniqueFd connection) override;
  void accept_failed(runtime::Worker& worker, int error) override;

 private:
  std::shared_ptr<const Generation> build(const config::ServiceConfig& service,
                                          const config::ProxyConfig& proxy);
  void refuse(runtime::Worker& worker, UniqueFd connection, bool global);

  const std::string name_;
  tcp::SessionTracker& sessions_;
  ProxyShared& shared_;
  health::HealthBoard* health_;
  ServiceCounters counters_;

  mutable std::mutex generation_mutex_;
  std::shared_ptr<const Generation> generation_;                // guarded by generation_mutex_
  std::map<std::string, std::shared_ptr<BackendStats>> stats_;  // control thread (update)

  std::mutex registry_mutex_;
  Session* sessions_head_ = nullptr;  // guarded by registry_mutex_
  std::atomic<bool> draining_{false};
  std::chrono::steady_clock::time_point drain_deadline_{};  // set before draining_
};

}  // namespace ferry::proxy
