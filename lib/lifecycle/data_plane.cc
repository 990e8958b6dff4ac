// Applying a configuration to the data plane: the XDP program and maps, and the AF_XDP fast path,
// in the order that keeps traffic flowing through a reload.
#include <boost/asio/post.hpp>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/lifecycle/daemon_state.hh"

namespace ferry::lifecycle {

// Same sockets (interfaces, queues, UMEM and ring sizes unchanged): the workers' tables are
// rebuilt and published first, then the XDP maps, so a service this reload adds is known to the
// workers before XDP steers its first frame to them; no socket is touched and frames in flight
// stay in flight. Different sockets: the fast path is taken down before the program may change
// (its maps hold the sockets), the program is brought in line, and a new fast path is bound.
void Daemon::State::apply_data_plane(const config::Config& configured) {
  const config::Config next = admin::effective_config(configured, admin);
  bool keep_sockets = fastpath && fastpath->serves_layout_of(next.xdp);
  if (!next.xdp.interfaces.empty()) {
    fastpath::FastpathPlane::check_tables(next);
    // An interface that is not there (deleted, not re-created yet) fails here, before the running
    // fast path is taken down: its other ports keep serving, and link_watch re-binds on return.
    if (!keep_sockets) fastpath::resolve_layout(next.xdp, fastpath::system_interface_facts());
  }
  if (keep_sockets) {
    fastpath->apply(next);
  } else {
    fastpath.reset();
  }
  xdp->apply(next);
  if (!keep_sockets && !next.xdp.interfaces.empty()) {
    xdp::XdpMapFds maps = xdp->program()->map_fds();
    fastpath::FastpathHooks hooks;
    hooks.enroll_heartbeat = [this](const std::string& name) -> std::function<void()> {
      std::shared_ptr<Heartbeat> beat = heartbeats.enroll(name, "xdp");
      return [beat] { beat->beat(); };
    };
    // Down and disabled backends leave the Maglev tables, and their flows move; refresh_backends()
    // rebuilds them on health transitions, apply_steering() on the operator's changes.
    hooks.backend_up = [this](const std::string& service, const net::Endpoint& backend) {
      return health.state(service, backend)->up.load(std::memory_order_relaxed) &&
             admin::keeps_flows(admin, service, backend);
    };
    hooks.flows_reset_ms = [this](const net::IpAddress& vip) -> std::optional<std::uint32_t> {
      auto it = flows_reset_ms.find(vip.to_string());
      if (it == flows_reset_ms.end()) return std::nullopt;
      return it->second;
    };
    fastpath::XskMapFds map_fds{maps.ifslots, maps.xsks};
    if (handed_fastpath) {
      // A takeover: the running ferryd's sockets and UMEM; the workers start in the pause.
      fastpath::HandedOverFastpath handed = std::move(*handed_fastpath);
      handed_fastpath.reset();
      fastpath = std::make_unique<fastpath::FastpathPlane>(io, registry, map_fds, next,
                                                           std::move(hooks), std::move(handed));
    } else {
      fastpath =
          std::make_unique<fastpath::FastpathPlane>(io, registry, map_fds, next, std::move(hooks));
    }
  }
  follow_links();
  apply_health(next);
  apply_announce(next);
}

// A drained backend weighs 0 in the new tables (Maglev, the proxy's policies) but keeps its
// established flows and connections; a disabled one leaves the UDP tables altogether. The TCP
// side builds a new generation: open connections keep theirs and finish where they are.
void Daemon::State::apply_steering() {
  apply_data_plane(*config);
  tcp::TcpApplyResult result = tcp->apply(admin::effective_config(*config, admin));
  for (const auto& err : result.errors) log::error("backend: {}", err);
  refresh_announcements();
}

// The watch learns the ifindexes just bound; a deletion it reports leaves the plane as it is (the
// port's sockets are dead, the others serve) until the interface returns.
void Daemon::State::follow_links() {
  if (!link_watch && fastpath) {
    link_watch = std::make_unique<fastpath::LinkWatch>(
        io, registry,
        [this](const auto&) {
          // Not from inside the watch's handler: the re-bind replaces the plane and follows again.
          boost::asio::post(io, [this] { rebind_data_plane(); });
        },
        [this] {
          if (fastpath) fastpath->refresh_ports();  // an MTU may have changed
        });
  }
  if (!link_watch) return;
  std::vector<std::pair<std::string, int>> bound;
  if (fastpath) {
    for (const auto& port : fastpath->layout().ports) bound.emplace_back(port.ifname, port.ifindex);
  }
  link_watch->follow(bound);
}

void Daemon::State::rebind_data_plane() {
  if (fastpath && fastpath->serves_layout_of(config->xdp)) return;  // a reload got there first
  auto started = std::chrono::steady_clock::now();
  try {
    apply_data_plane(*config);
    log::notice(
        "fast path: serving again after an interface returned, re-bound in {:.1f} ms: {}",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count(),
        summary());
    refresh_announcements();
  } catch (const std::exception& e) {
    log::error(
        "fast path: binding again after an interface returned failed: {}; `ferryctl "
        "reload` retries",
        e.what());
  }
}

void Daemon::State::apply_health(const config::Config& next) {
  std::vector<health::CheckTarget> targets = health::check_targets(next.services);
  if (!health_checker && !targets.empty()) {
    // A backend's first passing check may let its VIP be announced.
    health.subscribe_first_pass(
        [this](const std::string&, const net::Endpoint&) { post_announce_refresh(); });
    health.subscribe([this](const std::string&, const net::Endpoint&, bool) {
      // On the checker's thread: the rebuild (Maglev over every UDP service) runs on the control
      // thread, once for however many transitions arrive before it runs.
      if (backends_refresh_posted.exchange(true)) return;
      boost::asio::post(io, [this] { refresh_backends(); });
    });
    health::HealthCheckerOptions options;
    std::shared_ptr<Heartbeat> beat = heartbeats.enroll("health", "health");
    options.heartbeat = [beat] { beat->beat(); };
    health_checker = std::make_unique<health::HealthChecker>(health, std::move(options));
    health_checker->start();
  }
  if (health_checker) health_checker->set_targets(std::move(targets));
  // Every configured backend is on the board (ferry_backend_up shows it), nothing else is.
  auto configured = health::configured_backends(next.services);
  health.retain(configured);
  for (const auto& [service, backend] : configured) health.state(service, backend);
}

void Daemon::State::refresh_backends() {
  backends_refresh_posted.store(false);
  refresh_announcements();  // a VIP that cannot be served stops attracting traffic first
  rebuild_fastpath_tables("backend health changed");
}

void Daemon::State::rebuild_fastpath_tables(std::string_view why) {
  if (!fastpath) return;
  try {
    auto started = std::chrono::steady_clock::now();
    fastpath->refresh_backends();
    log::info("fast path: {}; tables rebuilt in {:.1f} ms (generation {})", why,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count(),
              fastpath->table_generation());
  } catch (const std::exception& e) {
    log::error("fast path: rebuilding the tables ({}) failed, the previous ones stay: {}", why,
               e.what());
  }
}

}  // namespace ferry::lifecycle
