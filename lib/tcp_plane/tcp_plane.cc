// The TCP side of the daemon (see tcp_plane.hh).
#include "lib/tcp_plane/tcp_plane.hh"

#include <fmt/format.h>

#include "lib/common/log.hh"
#include "lib/uring/probe.hh"

namespace ferry::tcp {
namespace {

constexpr auto kCloseTimeout = std::chrono::seconds(2);

}  // namespace

nlohmann::json TcpApplyResult::to_json() const {
  return {{"started", started}, {"stopped", stopped}, {"added", added},
          {"removed", removed}, {"errors", errors},   {"restart_required", restart_required}};
}

TcpPlane::TcpPlane(metrics::Registry& registry, runtime::HeartbeatHook heartbeat,
                   health::HealthBoard* health)
    : registry_(registry), heartbeat_(std::move(heartbeat)), health_(health) {}

TcpPlane::~TcpPlane() {
  stop();
}

std::vector<TcpPlane::Desired> TcpPlane::desired_services(const config::Config& config) {
  std::vector<Desired> out;
  for (const config::ServiceConfig& s : config.services) {
    // An encapsulating service's TCP is balanced per packet by the fast path, never terminated.
    if (!s.protocols.tcp || s.forwarding != config::Forwarding::nat) continue;
    if (s.mode == config::ServiceMode::echo || s.mode == config::ServiceMode::proxy) {
      out.push_back({&s, net::Endpoint{s.vip, s.port}});
    }
  }
  return out;
}

void TcpPlane::start(const config::Config& config) {
  std::lock_guard lock(mutex_);
  if (runtime_) throw std::logic_error("tcp: start() while running");
  start_locked(config);
}

void TcpPlane::start_locked(const config::Config& config) {
  std::vector<Desired> desired = desired_services(config);
  if (desired.empty()) return;  // an idle daemon stays idle: no threads, no rings
  TcpOptions options = tcp_options_from(config.tcp, heartbeat_);
  auto rt = std::make_unique<runtime::Runtime>(options.runtime);
  rt->start();
  // What the rings got, not what was asked: a kernel before 6.1 refuses DEFER_TASKRUN.
  defer_taskrun_ = rt->worker_count() > 0 && rt->worker(0).ring().defer_taskrun();
  runtime_ = std::move(rt);
  options_ = std::move(options);
  tcp_config_ = config.tcp;
  proxy_config_ = config.tcp.proxy;
  proxy_shared_.max_connections.store(config.tcp.proxy.max_connections);
  try {
    for (const Desired& d : desired) add_service_locked(d);
  } catch (...) {
    inherited_.clear();
    stop_locked();
    throw;
  }
  for (const HandedOverListener& l : inherited_) {
    if (!l.fds.empty()) {
      log::notice("service {}: no longer configured; its handed-over listeners close", l.service);
    }
  }
  inherited_.clear();
  metric_handles_ = runtime_->register_metrics(registry_);
  metric_handles_.push_back(uring::register_feature_metrics(registry_, uring::kernel_features()));
  metric_handles_.push_back(registry_.add([this](metrics::SnapshotBuilder& out) {
    std::lock_guard lock(services_mutex_);
    for (const auto& [name, service] : services_) service->collect(out);
  }));
  log::info("tcp: {} workers, io_ready {}, listener {}, recv {}", options_->runtime.workers,
            runtime::to_string(options_->runtime.io_ready), to_string(options_->listener_mode),
            options_->runtime.recv_modes.to_json().dump());
}

void TcpPlane::add_service_locked(const Desired& d) {
  const config::ServiceConfig& config = *d.service;
  std::shared_ptr<TcpService> service;
  std::shared_ptr<proxy::ProxyService> proxied;
  if (config.mode == config::ServiceMode::echo) {
    service = std::make_shared<EchoService>(config.name, d.at, options_->listener_mode,
                                            options_->runtime.workers, options_->multishot_accept,
                                            sessions_);
  } else {
    proxied = std::make_shared<proxy::ProxyService>(
        config, proxy_config_, options_->listener_mode, options_->runtime.workers,
        options_->multishot_accept, sessions_, proxy_shared_, health_);
    service = proxied;
  }
  std::vector<UniqueFd> inherited;
  for (HandedOverListener& l : inherited_) {
    if (l.service == config.name && l.kind == service->kind() && l.configured == d.at) {
      inherited = std::move(l.fds);
    }
  }
  const bool handed_over = !inherited.empty();
  try {
    service->listen(*runtime_, std::move(inherited));
  } catch (const std::system_error& e) {
    // what() already ends in the errno text; say which service it is about.
    throw std::runtime_error(fmt::format("service {}: {}", config.name, e.what()));
  }
  if (proxied) {
    sweeper_.watch(proxied);
    log::info("service {}: TCP proxy on {} to {} backends ({}){}", config.name,
              service->bound().to_string(), config.backends.size(),
              config::to_string(config.balance), handed_over ? ", listeners handed over" : "");
  } else {
    log::info("service {}: echo on {} (TCP)", config.name, service->bound().to_string());
  }
  std::lock_guard lock(services_mutex_);
  services_[config.name] = std::move(service);
}

void TcpPlane::end_connections_locked(TcpService& service) {
  service.end_connections(*runtime_);
  sweeper_.nudge();  // a proxy's drain wants a faster sweep
}

void TcpPlane::remove_service_locked(const std::string& name) {
  auto it = services_.find(name);
  if (it == services_.end()) return;
  std::shared_ptr<TcpService> service = it->second;
  {
    std::lock_guard lock(services_mutex_);
    services_.erase(it);
  }
  if (!service->close_listeners(*runtime_, kCloseTimeout)) {
    log::warning("service {}: workers did not confirm closing the listener within 2 s", name);
    retired_.push_back(service);
  }
  end_connections_locked(*service);
  log::info("service {}: {} on {} removed ({} connections {})", name, service->kind(),
            service->bound().to_string(), service->open_connections(),
            service->kind() == "proxy" ? "draining" : "closed");
}

TcpApplyResult TcpPlane::apply(const config::Config& config) {
  std::lock_guard lock(mutex_);
  TcpApplyResult result;
  std::vector<Desired> desired = desired_services(config);
  if (!runtime_) {
    if (desired.empty()) return result;
    try {
      start_locked(config);
      result.started = true;
      for (const Desired& d : desired) result.added.push_back(d.service->name);
    } catch (const std::exception& e) {
      result.errors.push_back(e.what());
    }
    return result;
  }
  if (desired.empty()) {
    for (const auto& [name, service] : services_) result.removed.push_back(name);
    stop_locked();
    result.stopped = true;
    return result;
  }
  if (config.tcp.workers != tcp_config_.workers) {
    result.restart_required.push_back(fmt::format("tcp.workers {} -> {}: restart ferryd to apply",
                                                  tcp_config_.workers, config.tcp.workers));
  }
  if (!(config.tcp.buffers == tcp_config_.buffers)) {
    result.restart_required.push_back("tcp.buffers changed: restart ferryd to apply");
  }
  if (!(config.tcp.scheduler == tcp_config_.scheduler)) {
    result.restart_required.push_back("tcp.scheduler changed: restart ferryd to apply");
  }
  for (const std::string& r : result.restart_required) log::warning("tcp: {}", r);

  proxy_config_ = config.tcp.proxy;
  proxy_shared_.max_connections.store(config.tcp.proxy.max_connections);
  std::vector<std::string> gone;
  for (const auto& [name, service] : services_) {
    bool keep = false;
    for (const Desired& d : desired) {
      keep = keep || (d.service->name == name && d.at == service->configured() &&
                      to_string(d.service->mode) == service->kind());
    }
    if (!keep) gone.push_back(name);
  }
  for (const std::string& name : gone) {
    remove_service_locked(name);
    result.removed.push_back(name);
  }
  for (const Desired& d : desired) {
    auto kept = services_.find(d.service->name);
    if (kept != services_.end()) {
      if (auto* p = dynamic_cast<proxy::ProxyService*>(kept->second.get())) {
        p->update(*d.service, proxy_config_);  // open connections keep their backend
      }
      continue;
    }
    try {
      add_service_locked(d);
      result.added.push_back(d.service->name);
    } catch (const std::exception& e) {
      log::error("{}", e.what());
      result.errors.push_back(e.what());
    }
  }
  return result;
}

void TcpPlane::stop() {
  std::lock_guard lock(mutex_);
  stop_locked();
}

void TcpPlane::stop_locked() {
  if (!runtime_) return;
  for (const auto& [name, service] : services_) {
    if (!service->close_listeners(*runtime_, kCloseTimeout)) retired_.push_back(service);
  }
  for (const auto& [name, service] : services_) end_connections_locked(*service);
  // Proxies drain for their grace, then the sweeper resets what is left.
  const auto grace = std::chrono::milliseconds(proxy_config_.drain_timeout_ms) + kCloseTimeout;
  if (!sessions_.wait_idle(grace)) {
    for (const auto& [name, service] : services_) {
      if (auto* p = dynamic_cast<proxy::ProxyService*>(service.get())) p->reset_all();
    }
    if (!sessions_.wait_idle(kCloseTimeout)) {
      log::warning("tcp: {} connections still open after the drain and a reset; stopping anyway",
                   sessions_.live());
    }
  }
  sweeper_.stop();
  // The collectors read worker objects the runtime frees: drop them first.
  metric_handles_.clear();
  runtime_->stop();
  runtime_.reset();  // frees any connection task that never finished
  {
    std::lock_guard lock(services_mutex_);
    services_.clear();
  }
  retired_.clear();
  options_.reset();
}

std::vector<HandedOverListener> TcpPlane::hand_over_listeners() const {
  std::lock_guard lock(mutex_);
  std::vector<HandedOverListener> out;
  for (const auto& [name, service] : services_) {
    HandedOverListener l{name, std::string(service->kind()), service->configured(), {}};
    for (int fd : service->listening_fds()) l.fds.push_back(duplicate_fd(fd));
    out.push_back(std::move(l));
  }
  return out;
}

void TcpPlane::inherit_listeners(std::vector<HandedOverListener> listeners) {
  std::lock_guard lock(mutex_);
  inherited_ = std::move(listeners);
}

void TcpPlane::stop_accepting() {
  std::lock_guard lock(mutex_);
  if (!runtime_) return;
  for (const auto& [name, service] : services_) {
    if (!service->close_listeners(*runtime_, kCloseTimeout)) retired_.push_back(service);
  }
}

bool TcpPlane::running() const {
  std::lock_guard lock(mutex_);
  return runtime_ != nullptr;
}

nlohmann::json TcpPlane::status() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = {{"running", runtime_ != nullptr},
                        {"workers", runtime_ ? runtime_->worker_count() : 0},
                        {"features", uring::kernel_features().to_json()}};
  if (options_) {
    nlohmann::json opts = options_->to_json();
    for (auto it = opts.begin(); it != opts.end(); ++it) {
      if (it.key() != "workers") out[it.key()] = it.value();
    }
  }
  if (runtime_) out["defer_taskrun"] = defer_taskrun_;
  nlohmann::json listeners = nlohmann::json::array();
  for (const auto& [name, service] : services_) {
    listeners.push_back({{"service", name}, {"address", service->bound().to_string()}});
  }
  out["listeners"] = std::move(listeners);
  out["connections"] = sessions_.live();
  out["proxy"] = {{"connections", proxy_shared_.active.load(std::memory_order_relaxed)},
                  {"max_connections", proxy_config_.max_connections},
                  {"connect_timeout_ms", proxy_config_.connect_timeout_ms},
                  {"connect_attempts", proxy_config_.connect_attempts},
                  {"idle_timeout_ms", proxy_config_.idle_timeout_ms},
                  {"drain_timeout_ms", proxy_config_.drain_timeout_ms},
                  {"high_water_bytes", proxy_config_.high_water_bytes},
                  {"low_water_bytes", proxy_config_.low_water_bytes},
                  {"draining_services", sweeper_.watched() - proxy_services_locked()}};
  return out;
}

nlohmann::json TcpPlane::services() const {
  std::lock_guard lock(mutex_);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, service] : services_) {
    nlohmann::json entry = {{"kind", service->kind()},
                            {"address", service->bound().to_string()},
                            {"connections", service->open_connections()}};
    nlohmann::json extra = service->status();
    if (!extra.is_null()) entry[std::string(service->kind())] = std::move(extra);
    out[name] = std::move(entry);
  }
  return out;
}

std::size_t TcpPlane::proxy_services_locked() const {
  std::size_t n = 0;
  for (const auto& [name, service] : services_) n += service->kind() == "proxy";
  return n;
}

nlohmann::json TcpPlane::workers() const {
  std::lock_guard lock(mutex_);
  return runtime_ ? runtime_->workers_json() : nlohmann::json::array();
}

std::vector<TcpListenerInfo> TcpPlane::listeners() const {
  std::lock_guard lock(mutex_);
  std::vector<TcpListenerInfo> out;
  for (const auto& [name, service] : services_) out.push_back({name, service->bound()});
  return out;
}

std::optional<net::Endpoint> TcpPlane::bound_address(const std::string& service) const {
  std::lock_guard lock(mutex_);
  auto it = services_.find(service);
  if (it == services_.end()) return std::nullopt;
  return it->second->bound();
}

}  // namespace ferry::tcp
