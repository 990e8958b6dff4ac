// What the daemon gives its control commands (Daemon::State as their CommandTarget): the status,
// services and workers reports and the reload, and its own metrics. All on the control thread.
#include <unistd.h>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/common/time_text.hh"
#include "lib/control/protocol.hh"
#include "lib/health/health_report.hh"
#include "lib/lifecycle/daemon_state.hh"
#include "lib/quic/lb_config.hh"

namespace ferry::lifecycle {
namespace {

using nlohmann::json;

json protocols_json(const config::Protocols& p) {
  json out = json::array();
  if (p.udp) out.push_back("udp");
  if (p.tcp) out.push_back("tcp");
  return out;
}

// A service's QUIC-LB as `services` shows it: each configuration's codepoint, lengths and form,
// never its key; null when the service has none.
json quic_lb_report(const config::ServiceConfig& svc) {
  if (!svc.quic_lb) return nullptr;
  json configs = json::array();
  for (const config::QuicLbConfigEntry& e : svc.quic_lb->configs) {
    quic::LbConfig c{e.id, e.server_id_bytes, e.nonce_bytes, e.key};
    configs.push_back({{"id", e.id},
                       {"server_id_bytes", e.server_id_bytes},
                       {"nonce_bytes", e.nonce_bytes},
                       {"algorithm", std::string(quic::to_string(c.algorithm()))}});
  }
  return configs;
}

}  // namespace

json Daemon::State::tcp_control_listen() const {
  const control::ControlServer* control = control_plane.server();
  auto bound = control ? control->tcp_endpoint() : std::nullopt;
  return bound ? json(bound->to_string()) : json();
}

std::string Daemon::State::summary() const {
  std::size_t udp = 0, tcp = 0;
  for (const auto& svc : config->services) {
    udp += svc.protocols.udp;
    tcp += svc.protocols.tcp;
  }
  return fmt::format(
      "{} services ({} udp, {} tcp), {} routes, XDP on {} interfaces, {} AF_XDP "
      "workers; control {}; metrics {}",
      config->services.size(), udp, tcp, config->routes.size(),
      xdp_plane.plane() ? xdp_plane.plane()->attached_count() : 0,
      fastpath_plane.plane() ? fastpath_plane.plane()->worker_count() : 0, config->control.socket,
      config->metrics.listen ? config->metrics.listen->to_string() : "off");
}

json Daemon::State::reload(const std::string& reason) {
  log::info("reloading {} ({})", config_path, reason);
  auto reject = [this](const std::exception& e) {
    ++reload_failures;
    last_reload_error = e.what();
    log::error("reload rejected, the running configuration stays in force: {}", e.what());
    return control::CommandError("rejected", e.what());
  };
  config::Config next;
  try {
    next = config::load_config(config_path);
  } catch (const config::ConfigError& e) {
    throw reject(e);
  }
  // Every plane checks `next` before any applies it: a refusal changes none of them.
  ApplyNotes notes;
  try {
    const config::Config running = admin::effective_config(*config, admin);
    planes.apply(admin::effective_config(next, admin), &running, notes);
  } catch (const std::exception& e) {
    throw reject(e);
  }
  admin.configure(next.services);  // the reload stands: forget the backends it removed
  // TCP services: a listener that cannot be bound is reported, the rest of the reload stands.
  for (const auto& err : notes.errors) log::error("reload: {}", err);
  for (const auto& key : notes.restart_required) {
    log::warning("reload: {} changed; the new value takes effect after a restart", key);
  }
  // Keys that need a restart keep their running values, so status tells the truth.
  next.control = config->control;
  next.metrics = config->metrics;
  log::Level level;
  if (log::parse_level(next.log.level, level)) log::set_threshold(level);
  config = std::make_shared<const config::Config>(std::move(next));
  config_loaded_at = std::chrono::system_clock::now();
  ++reloads;
  last_reload_error.reset();
  log::notice("reloaded {}: {}", config_path, summary());
  announce_plane.refresh();
  return {{"reloaded", true},
          {"config_path", config_path},
          {"restart_required", notes.restart_required},
          {"tcp", notes.details.value("tcp", json())}};
}

json Daemon::State::status_report() const {
  auto uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_steady);
  auto beats = heartbeats.inspect(kStaleAfter);
  std::size_t alive = 0;
  for (const auto& b : beats) alive += b.alive;
  const control::ControlServer* control = control_plane.server();
  const metrics::MetricsHttpServer* metrics_http = metrics_plane.server();
  const tcp::TcpPlane* tcp = tcp_plane.plane();
  json xdp_status;
  if (const xdp::XdpPlane* xdp = xdp_plane.plane()) {
    xdp_status = xdp->status();
    if (const fastpath::FastpathPlane* fastpath = fastpath_plane.plane()) {
      fastpath->annotate_status(xdp_status);
    }
  }
  return json{
      {"version", FERRY_VERSION},
      {"pid", static_cast<int>(getpid())},
      {"state", "running"},
      {"uptime_seconds", uptime.count()},
      {"config_path", config_path},
      {"config_loaded_at", iso8601_utc(config_loaded_at)},
      {"reloads", reloads},
      {"reload_failures", reload_failures},
      {"last_reload_error", last_reload_error ? json(*last_reload_error) : json()},
      {"control",
       {{"socket", config->control.socket},
        {"connections", control ? control->open_connections() : 0},
        {"tcp", tcp_control_listen()}}},
      {"metrics",
       metrics_http ? json{{"listen", metrics_http->local_endpoint().to_string()}} : json()},
      {"xdp", std::move(xdp_status)},
      {"services", config->services.size()},
      {"tcp", tcp ? tcp->status() : json()},
      {"routes", config->routes.size()},
      {"health", health::health_status(health, health_plane.checker())},
      {"announce", announce_plane.announcer() ? announce_plane.report() : json()},
      {"workers", {{"total", beats.size()}, {"alive", alive}}},
      {"upgrade", upgrade_status()},
      {"handover", handover},
  };
}

json Daemon::State::services_report() const {
  json out = json::array();
  std::map<std::pair<std::string, std::string>, json> health_of;
  json health_now = health::health_status(health, health_plane.checker());
  for (auto& b : health_now["backends"]) {
    std::pair<std::string, std::string> key{b["service"], b["address"]};
    b.erase("service");
    health_of.emplace(std::move(key), std::move(b));
  }
  // Per TCP service (echo, proxy): listener, open connections, proxy state.
  const tcp::TcpPlane* tcp = tcp_plane.plane();
  json tcp_services = tcp ? tcp->services() : json::object();
  for (const auto& svc : config->services) {
    json backends = json::array();
    for (std::size_t i = 0; i < svc.backends.size(); ++i) {
      const net::Endpoint& b = svc.backends[i];
      auto it = health_of.find({svc.name, b.to_string()});
      json row = it != health_of.end() ? it->second
                                       : json{{"address", b.to_string()},
                                              {"state", "unknown"},
                                              {"up", true},  // unchecked backends take traffic
                                              {"checked", false}};
      if (auto steering = admin.find(svc.name, b)) {
        row["weight"] = steering->weight();
        row["admin"] = std::string(admin::to_string(steering->admin.state));
      }
      if (const config::ServerId* id = svc.server_id(i))
        row["server_id"] = config::server_id_text(*id);
      backends.push_back(std::move(row));
    }
    // Which engine serves each protocol: UDP is balanced (or reflected) by the AF_XDP workers,
    // TCP proxied (or echoed) by the io_uring runtime, both balanced per packet by the workers
    // when the service encapsulates (direct server return).
    json paths = json::object();
    bool echo = svc.mode == config::ServiceMode::echo;
    bool encapsulates = svc.forwarding != config::Forwarding::nat;
    if (svc.protocols.udp) paths["udp"] = "fastpath";
    if (svc.protocols.tcp) paths["tcp"] = encapsulates ? "fastpath" : echo ? "echo" : "proxy";
    bool balanced = svc.mode == config::ServiceMode::proxy;
    json check = svc.health && balanced ? json(config::to_string(svc.health->type)) : json(nullptr);
    out.push_back({{"name", svc.name},
                   {"vip", svc.vip.to_string()},
                   {"port", svc.port},
                   {"protocols", protocols_json(svc.protocols)},
                   {"mode", config::to_string(svc.mode)},
                   {"paths", std::move(paths)},
                   {"forwarding", config::to_string(svc.forwarding)},
                   {"balance", balanced ? json(config::to_string(svc.balance)) : json(nullptr)},
                   {"check", check},
                   {"quic_lb", quic_lb_report(svc)},
                   {"backends", std::move(backends)}});
    json served = tcp_services.value(svc.name, json(nullptr));
    json proxy = served.is_object() ? served.value("proxy", json(nullptr)) : json();
    if (served.is_object()) served.erase("proxy");
    out.back()["tcp"] = std::move(served);
    out.back()["proxy"] = std::move(proxy);
  }
  return json{{"services", std::move(out)}};
}

json Daemon::State::workers_report() const {
  json out = json::array();
  const fastpath::FastpathPlane* fastpath = fastpath_plane.plane();
  json details = fastpath ? fastpath->worker_details() : json::object();
  json tcp_details = json::object();
  const tcp::TcpPlane* tcp = tcp_plane.plane();
  for (const auto& w : tcp ? tcp->workers() : json::array()) {
    json counters = w;
    counters.erase("worker");
    tcp_details[w.value("worker", "")] = std::move(counters);
  }
  for (const auto& b : heartbeats.inspect(kStaleAfter)) {
    json row = {{"name", b.name},
                {"kind", b.kind},
                {"alive", b.alive},
                {"heartbeat_age_ms", b.age.count()}};
    if (b.kind == "xdp" && details.contains(b.name)) row.update(details[b.name]);
    if (b.kind == "tcp" && tcp_details.contains(b.name)) row.update(tcp_details[b.name]);
    out.push_back(std::move(row));
  }
  return json{{"workers", std::move(out)}};
}

void Daemon::State::collect(metrics::SnapshotBuilder& out) const {
  health::collect_health(health, health_plane.checker(), out);
  constexpr const char* kUpgradesHelp =
      "Upgrades this ferryd ran (ferryctl upgrade, SIGUSR2), by result: ok = handed over.";
  out.counter("ferry_upgrades_total", kUpgradesHelp, {{"result", "ok"}},
              static_cast<double>(upgrades_ok.load()));
  out.counter("ferry_upgrades_total", kUpgradesHelp, {{"result", "failed"}},
              static_cast<double>(upgrades_failed.load()));
  out.gauge("ferry_handover_pause_seconds",
            "How long the fast path paused when this ferryd took over (0: it started afresh).", {},
            handover_pause_seconds.load());
  admin.collect(out);
  out.counter("ferry_config_reloads_total", "Successful configuration reloads.", {},
              static_cast<double>(reloads));
  out.counter("ferry_config_reload_failures_total",
              "Rejected configuration reloads (the running configuration stayed in force).", {},
              static_cast<double>(reload_failures));
  out.gauge("ferry_config_last_reload_successful",
            "1 if the last reload succeeded or none was attempted, 0 if it was rejected.", {},
            last_reload_error ? 0 : 1);
  for (const auto& b : heartbeats.inspect(kStaleAfter)) {
    out.gauge("ferry_thread_heartbeat_age_seconds",
              "Time since each daemon thread last showed progress.",
              {{"worker", b.name}, {"kind", b.kind}}, static_cast<double>(b.age.count()) / 1000.0);
  }
}

}  // namespace ferry::lifecycle
