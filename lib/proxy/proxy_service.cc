// A TCP service in mode proxy (see proxy_service.hh).
#include "lib/proxy/proxy_service.hh"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "lib/common/log.hh"
#include "lib/proxy/proxy_session.hh"
#include "lib/runtime/worker.hh"

namespace ferry::proxy {

ProxySettings ProxySettings::from(const config::ProxyConfig& proxy,
                                  const config::ServiceConfig& service) {
  ProxySettings s;
  s.connect_timeout_ms = proxy.connect_timeout_ms;
  s.connect_attempts = proxy.connect_attempts;
  s.idle_timeout_ms = proxy.idle_timeout_ms;
  s.drain_timeout_ms = proxy.drain_timeout_ms;
  s.high_water_bytes = proxy.high_water_bytes;
  s.low_water_bytes = proxy.low_water_bytes;
  s.max_connections = service.max_connections;
  s.send_header = service.proxy_protocol;
  s.accept_header = service.accept_proxy_protocol;
  return s;
}

void abort_socket(int fd) {
  sockaddr unspec{};
  unspec.sa_family = AF_UNSPEC;
  ::connect(fd, &unspec, sizeof(unspec));
}

ProxyService::ProxyService(const config::ServiceConfig& service, const config::ProxyConfig& proxy,
                           tcp::ListenerMode mode, std::uint32_t workers, bool multishot_accept,
                           tcp::SessionTracker& sessions, ProxyShared& shared,
                           health::HealthBoard* health)
    : ListeningService(net::Endpoint{service.vip, service.port}, mode, workers, multishot_accept),
      name_(service.name),
      sessions_(sessions),
      shared_(shared),
      health_(health) {
  generation_ = build(service, proxy);
}

ProxyService::~ProxyService() = default;

std::shared_ptr<const Generation> ProxyService::build(const config::ServiceConfig& service,
                                                      const config::ProxyConfig& proxy) {
  std::vector<Backend> backends;
  std::map<std::string, std::shared_ptr<BackendStats>> stats;
  for (std::size_t i = 0; i < service.backends.size(); ++i) {
    const net::Endpoint& e = service.backends[i];
    Backend b;
    b.endpoint = e;
    b.name = e.to_string();
    b.weight = service.weight(i);
    b.address_len = e.to_sockaddr(b.address);
    if (health_ != nullptr) b.health = health_->state(service.name, e);
    auto it = stats_.find(b.name);
    b.stats = it != stats_.end() ? it->second : std::make_shared<BackendStats>();
    stats[b.name] = b.stats;
    backends.push_back(std::move(b));
  }
  auto generation = std::make_shared<Generation>();
  // The generation being replaced (control thread: the only writer of generation_).
  const BackendPool* previous = generation_ ? generation_->pool.get() : nullptr;
  generation->pool = std::make_shared<BackendPool>(std::move(backends), service.balance, previous);
  generation->settings = ProxySettings::from(proxy, service);
  stats_ = std::move(stats);
  return generation;
}

void ProxyService::update(const config::ServiceConfig& service, const config::ProxyConfig& proxy) {
  std::shared_ptr<const Generation> next = build(service, proxy);
  std::lock_guard lock(generation_mutex_);
  generation_ = std::move(next);
}

std::shared_ptr<const Generation> ProxyService::generation() const {
  std::lock_guard lock(generation_mutex_);
  return generation_;
}

void ProxyService::accepted(runtime::Worker& worker, UniqueFd conn) {
  std::shared_ptr<const Generation> gen = generation();
  const std::int64_t cap = gen->settings.max_connections;
  if (counters_.active.fetch_add(1, std::memory_order_relaxed) >= cap && cap != 0) {
    counters_.active.fetch_sub(1, std::memory_order_relaxed);
    refuse(worker, std::move(conn), false);
    return;
  }
  if (shared_.active.fetch_add(1, std::memory_order_relaxed) >=
      shared_.max_connections.load(std::memory_order_relaxed)) {
    shared_.active.fetch_sub(1, std::memory_order_relaxed);
    counters_.active.fetch_sub(1, std::memory_order_relaxed);
    refuse(worker, std::move(conn), true);
    return;
  }
  bump(counters_.total);
  sessions_.started();
  worker.runtime().spawn(
      proxy_session(worker, shared_from_this(), std::move(gen), std::move(conn)));
}

void ProxyService::refuse(runtime::Worker& worker, UniqueFd conn, bool global) {
  std::atomic<std::uint64_t>& counter =
      global ? counters_.refused_global_limit : counters_.refused_service_limit;
  bump(counter);
  abort_socket(conn.get());  // RST: the client learns at once, no half-open connection lingers
  const std::uint64_t n = read(counter);
  if (n == 1 || n % 1000 == 0) {
    log::warning("service {}: connection refused on {}: {} ({} so far)", name_, worker.name(),
                 global ? "tcp.proxy.max_connections reached"
                        : "the service's max_connections "
                          "reached",
                 n);
  }
}

void ProxyService::accept_failed(runtime::Worker& worker, int error) {
  bump(counters_.accept_errors);
  const std::uint64_t n = read(counters_.accept_errors);
  if (n == 1 || n % 1000 == 0) {
    log::warning("service {}: accept on {} failed: {} ({} so far on {})", name_,
                 bound().to_string(), std::strerror(error), n, worker.name());
  }
}

void ProxyService::link(Session& s) {
  std::lock_guard lock(registry_mutex_);
  s.prev = nullptr;
  s.next = sessions_head_;
  if (sessions_head_ != nullptr) sessions_head_->prev = &s;
  sessions_head_ = &s;
  // Admitted while a drain is running (the listener was still open): it drains too.
}

void ProxyService::unlink(Session& s) {
  std::lock_guard lock(registry_mutex_);
  if (s.prev != nullptr) {
    s.prev->next = s.next;
  } else {
    sessions_head_ = s.next;
  }
  if (s.next != nullptr) s.next->prev = s.prev;
  s.prev = s.next = nullptr;
}

void ProxyService::set_backend_fd(Session& s, int fd) {
  std::lock_guard lock(registry_mutex_);
  s.backend_fd = fd;
}

void ProxyService::end_connections(runtime::Runtime&) {
  const std::uint32_t grace_ms = generation()->settings.drain_timeout_ms;
  drain_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  draining_.store(true, std::memory_order_release);
  if (grace_ms == 0) reset_all();
}

void ProxyService::reset_all() {
  std::lock_guard lock(registry_mutex_);
  for (Session* s = sessions_head_; s != nullptr; s = s->next) s->abort();
}

bool ProxyService::sweep(std::chrono::steady_clock::time_point now) {
  const bool draining = draining_.load(std::memory_order_acquire);
  if (draining && now >= drain_deadline_) {
    reset_all();
    return open_connections() > 0;
  }
  const std::int64_t now_ms = steady_now_ms();  // the clock the sessions' stamps are on
  std::lock_guard lock(registry_mutex_);
  for (Session* s = sessions_head_; s != nullptr; s = s->next) {
    const std::uint32_t idle_ms = s->generation->settings.idle_timeout_ms;
    // Still connecting (no forwarding task yet): the connect timeout is in charge.
    if (idle_ms == 0 || s->was_reset() || s->directions.load(std::memory_order_acquire) == 0) {
      continue;
    }
    if (now_ms - s->last_active_ms.load(std::memory_order_relaxed) < idle_ms) continue;
    bump(counters_.idle_timeouts);
    s->abort();
  }
  return !draining || open_connections() > 0;
}

std::chrono::milliseconds ProxyService::sweep_interval() const {
  const std::uint32_t idle_ms = generation()->settings.idle_timeout_ms;
  std::uint32_t tick = 1000;
  if (idle_ms != 0) tick = std::min<std::uint32_t>(tick, idle_ms / 8);
  if (draining()) tick = std::min<std::uint32_t>(tick, 50);
  return std::chrono::milliseconds(std::max<std::uint32_t>(tick, 5));
}

void ProxyService::collect(metrics::SnapshotBuilder& out) const {
  const metrics::Labels service = {{"service", name_}};
  auto counter = [&](const char* name, const char* help, const std::atomic<std::uint64_t>& v) {
    out.counter(name, help, service, static_cast<double>(read(v)));
  };
  out.gauge("ferry_proxy_connections_active", "Proxied client connections open now.", service,
            static_cast<double>(open_connections()));
  counter("ferry_proxy_connections_total", "Client connections admitted.", counters_.total);
  out.counter("ferry_proxy_connections_refused_total",
              "Client connections accepted and reset at once by a connection cap.",
              {{"service", name_}, {"reason", "service_limit"}},
              static_cast<double>(read(counters_.refused_service_limit)));
  out.counter("ferry_proxy_connections_refused_total",
              "Client connections accepted and reset at once by a connection cap.",
              {{"service", name_}, {"reason", "global_limit"}},
              static_cast<double>(read(counters_.refused_global_limit)));
  counter("ferry_proxy_connections_failed_total",
          "Clients reset because no backend could be connected.", counters_.failed);
  counter("ferry_proxy_retries_total", "Backend connect attempts after a failed one.",
          counters_.retries);
  counter("ferry_proxy_idle_timeouts_total", "Connections reset by the idle timeout.",
          counters_.idle_timeouts);
  counter("ferry_proxy_resets_total",
          "Connections ended by a reset (an error on either side, idle timeout, drain).",
          counters_.resets);
  counter("ferry_proxy_bytes_in_total", "Bytes received from clients and sent to backends.",
          counters_.bytes_in);
  counter("ferry_proxy_bytes_out_total", "Bytes received from backends and sent to clients.",
          counters_.bytes_out);
  out.gauge("ferry_proxy_peak_held_bytes",
            "Most unsent bytes one direction of a finished connection held (backpressure).",
            service, static_cast<double>(read(counters_.peak_held_bytes)));
  counter("ferry_proxy_accept_errors_total",
          "Failed accepts (fd or memory exhaustion backs off for 100 ms).",
          counters_.accept_errors);
  for (std::size_t i = 0; i < counters_.header_rejected.size(); ++i) {
    out.counter("ferry_proxy_header_rejected_total",
                "Clients of a service with accept_proxy_protocol reset for their PROXY header.",
                {{"service", name_}, {"reason", kHeaderRejectNames[i]}},
                static_cast<double>(read(counters_.header_rejected[i])));
  }
  std::shared_ptr<const Generation> gen = generation();
  for (std::size_t i = 0; i < gen->pool->size(); ++i) {
    const Backend& b = gen->pool->backend(i);
    const metrics::Labels labels = {{"service", name_}, {"backend", b.name}};
    const BackendStats& st = *b.stats;
    out.gauge("ferry_proxy_backend_connections_active", "Proxied connections to the backend now.",
              labels, static_cast<double>(st.active.load(std::memory_order_relaxed)));
    out.counter("ferry_proxy_backend_connections_total", "Connections established to the backend.",
                labels, static_cast<double>(read(st.total)));
    out.counter("ferry_proxy_backend_connect_failures_total",
                "Failed connect attempts to the backend (refused, timeout, unreachable).", labels,
                static_cast<double>(read(st.connect_failures)));
    out.counter("ferry_proxy_backend_bytes_in_total", "Bytes sent to the backend.", labels,
                static_cast<double>(read(st.bytes_in)));
    out.counter("ferry_proxy_backend_bytes_out_total",
                "Bytes received from the backend and sent to clients.", labels,
                static_cast<double>(read(st.bytes_out)));
    out.histogram("ferry_proxy_backend_connect_seconds",
                  "Time from connect submission to an established backend connection.", labels,
                  st.connect_latency.snapshot());
    out.gauge("ferry_proxy_backend_up",
              "1 when the backend may get new connections (its health flag), else 0.", labels,
              b.up() ? 1.0 : 0.0);
  }
}

nlohmann::json ProxyService::status() const {
  std::shared_ptr<const Generation> gen = generation();
  nlohmann::json backends = nlohmann::json::array();
  for (std::size_t i = 0; i < gen->pool->size(); ++i) {
    const Backend& b = gen->pool->backend(i);
    backends.push_back({{"backend", b.name},
                        {"up", b.up()},
                        {"active", b.stats->active.load(std::memory_order_relaxed)},
                        {"total", read(b.stats->total)},
                        {"connect_failures", read(b.stats->connect_failures)}});
  }
  return {{"active", open_connections()},
          {"total", read(counters_.total)},
          {"refused", read(counters_.refused_service_limit) + read(counters_.refused_global_limit)},
          {"failed", read(counters_.failed)},
          {"balance", config::to_string(gen->pool->policy())},
          {"draining", draining()},
          {"backends", std::move(backends)}};
}

}  // namespace ferry::proxy
