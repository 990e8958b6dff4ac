// The TCP side of the daemon: the io_uring runtime and the TCP services on it (echo, and the L4
// proxy of lib/proxy). Owned by the daemon's lifecycle, driven from the control thread: start,
// apply on reload, stop, and the status/workers views.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"
#include "lib/health/health_board.hh"
#include "lib/metrics/registry.hh"
#include "lib/proxy/proxy_service.hh"
#include "lib/proxy/proxy_sweeper.hh"
#include "lib/runtime/runtime.hh"
#include "lib/tcp/echo_service.hh"
#include "lib/tcp/tcp_options.hh"
#include "lib/tcp/tcp_service.hh"

namespace ferry::tcp {

struct TcpListenerInfo {
  std::string service;
  net::Endpoint address;  // as bound: the real port when the config said 0
};

// A service's listening sockets as a handover passes them from one ferryd to the next.
struct HandedOverListener {
  std::string service;
  std::string kind;          // "echo" | "proxy": taken only by a service of the same kind
  net::Endpoint configured;  // as in the config (port 0 in tests)
  std::vector<UniqueFd> fds;
};

// What a reload changed on the TCP side; `errors` are services that could not be brought up
// (the rest of the reload stays applied), `restart_required` tcp.* changes that need a restart.
struct TcpApplyResult {
  bool started = false;  // the runtime came up (first TCP service)
  bool stopped = false;  // the runtime went away (no TCP service left)
  std::vector<std::string> added;
  std::vector<std::string> removed;
  std::vector<std::string> errors;
  std::vector<std::string> restart_required;
  nlohmann::json to_json() const;
};

class TcpPlane {
 public:
  // `heartbeat` is called once per worker thread when the runtime starts (see
  // runtime::HeartbeatHook); may be empty. `health` holds the backends' up flags the proxy
  // honours; null: every backend is up.
  TcpPlane(metrics::Registry& registry, runtime::HeartbeatHook heartbeat = {},
           health::HealthBoard* health = nullptr);
  ~TcpPlane();  // stop()
  TcpPlane(const TcpPlane&) = delete;
  TcpPlane& operator=(const TcpPlane&) = delete;

  // Starts tcp.workers workers and listens for every TCP service (protocols containing tcp, mode
  // echo or proxy). With no such service nothing starts: no thread, no ring. Throws
  // std::runtime_error (a service that cannot listen: "service echo: cannot bind 127.0.0.1:7007
  // (...): Address already in use", a feature forced on that the kernel lacks) or
  // std::invalid_argument (a bad FERRY_* switch), and leaves nothing running then.
  void start(const config::Config& config);
  // Reload: adds and removes services (a removed echo service closes its connections, a removed
  // proxy service drains them: tcp.proxy.drain_timeout_ms, then reset); a proxy service that
  // keeps its vip:port gets its new backends/balance/limits for new connections while the open
  // ones keep their backend. Starts or stops the whole runtime when the first service appears or
  // the last goes. Changes of tcp.workers, tcp.buffers or tcp.scheduler need a restart and are
  // reported, not applied.
  TcpApplyResult apply(const config::Config& config);
  // A handover, old side: every service's listening sockets, fds duplicated for the wire.
  std::vector<HandedOverListener> hand_over_listeners() const;
  // A handover, new side, before start(): a service with the same name, kind and configured
  // address takes these sockets instead of opening its own; the rest are closed at start().
  void inherit_listeners(std::vector<HandedOverListener> listeners);
  // A handover, old side, once the successor accepts: stops accepting (the sockets stay open in
  // the successor); the open connections carry on until stop() drains them.
  void stop_accepting();
  // Closes the listeners, then the connections (echo at once, proxy after the drain grace, then
  // reset; waiting up to grace + 2 s for them to end), then stops and joins the workers.
  void stop();

  bool running() const;
  // {"running":..,"workers":N,"io_ready":"inbox",...,"features":{probe},"listeners":[...]}
  nlohmann::json status() const;
  // Per-worker scheduler counters: [{"worker":"tcp-0","tasks_run":..,...}] ([] when idle).
  nlohmann::json workers() const;
  std::vector<TcpListenerInfo> listeners() const;
  std::optional<net::Endpoint> bound_address(const std::string& service) const;
  // Per TCP service: {"kind":"echo"|"proxy", "address", "connections", and for proxies "proxy":
  // ProxyService::status()}, keyed by service name.
  nlohmann::json services() const;
  // The runtime while running (benchmarks, tests); null when idle.
  runtime::Runtime* runtime() { return runtime_.get(); }

 private:
  struct Desired {
    const config::ServiceConfig* service;
    net::Endpoint at;
  };
  std::vector<Desired> desired_services(const config::Config& config);
  void start_locked(const config::Config& config);
  void stop_locked();
  void add_service_locked(const Desired& d);
  void end_connections_locked(TcpService& service);
  std::size_t proxy_services_locked() const;
  void remove_service_locked(const std::string& name);

  metrics::Registry& registry_;
  runtime::HeartbeatHook heartbeat_;
  // Serialises the control-thread calls. Held while collectors are added to or removed from the
  // registry, so the collector itself must never take it (lock order: mutex_ -> registry ->
  // services_mutex_).
  mutable std::mutex mutex_;
  mutable std::mutex services_mutex_;  // services_ against the metrics collector
  std::unique_ptr<runtime::Runtime> runtime_;
  std::optional<TcpOptions> options_;
  // Whether the workers' rings got SINGLE_ISSUER|DEFER_TASKRUN, read once at start: a worker
  // that fails frees its ring while the runtime still stands.
  bool defer_taskrun_ = false;
  config::TcpConfig tcp_config_;  // as started, to tell what a reload would change
  SessionTracker sessions_;
  std::map<std::string, std::shared_ptr<TcpService>> services_;
  // Services whose accepts did not confirm their close in time: their acceptors may still be
  // referenced by a ring, so they live until the runtime stops.
  std::vector<std::shared_ptr<TcpService>> retired_;
  health::HealthBoard* health_;
  proxy::ProxyShared proxy_shared_;
  config::ProxyConfig proxy_config_;  // in effect
  proxy::ProxySweeper sweeper_;
  std::vector<metrics::Registry::Handle> metric_handles_;
  std::vector<HandedOverListener> inherited_;  // until start() takes them
};

}  // namespace ferry::tcp
