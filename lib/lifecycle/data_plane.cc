// Applying the running configuration to the planes outside a reload: the operator's steering
// (the `backend` command), an interface's return, health transitions; and what the announcer
// asks of the planes that serve.
#include <fmt/format.h>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/lifecycle/daemon_state.hh"

namespace ferry::lifecycle {

void Daemon::State::apply_data_plane(const config::Config& configured) {
  ApplyNotes notes;
  data_planes.apply(admin::effective_config(configured, admin), nullptr, notes);
}

// A drained backend weighs 0 in the new tables (Maglev, the proxy's policies) but keeps its
// established flows and connections; a disabled one leaves the UDP tables altogether. The TCP
// side builds a new generation: open connections keep theirs and finish where they are.
void Daemon::State::apply_steering() {
  ApplyNotes notes;
  planes.apply(admin::effective_config(*config, admin), nullptr, notes);
  for (const auto& err : notes.errors) log::error("backend: {}", err);
  announce_plane.refresh();
}

void Daemon::State::rebind_data_plane() {
  const fastpath::FastpathPlane* fastpath = fastpath_plane.plane();
  if (fastpath && fastpath->serves_layout_of(config->xdp)) return;  // a reload got there first
  auto started = std::chrono::steady_clock::now();
  try {
    apply_data_plane(*config);
    log::notice(
        "fast path: serving again after an interface returned, re-bound in {:.1f} ms: {}",
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count(),
        summary());
    announce_plane.refresh();
  } catch (const std::exception& e) {
    log::error(
        "fast path: binding again after an interface returned failed: {}; `ferryctl "
        "reload` retries",
        e.what());
  }
}

void Daemon::State::refresh_backends() {
  backends_refresh_posted.store(false);
  announce_plane.refresh();  // a VIP that cannot be served stops attracting traffic first
  fastpath_plane.rebuild_tables("backend health changed");
}

std::string Daemon::State::not_served(const config::ServiceConfig& service) const {
  bool encapsulates = service.forwarding != config::Forwarding::nat;
  bool udp = (service.protocols.udp || encapsulates) && service.mode != config::ServiceMode::echo;
  bool tcp = service.protocols.tcp && service.mode != config::ServiceMode::reflect && !encapsulates;
  if (udp && !fastpath_plane.plane()) return "the AF_XDP fast path is not running (see the log)";
  const tcp::TcpPlane* tcp_services = tcp_plane.plane();
  if (tcp && (!tcp_services || !tcp_services->bound_address(service.name))) {
    return fmt::format("not listening on {}:{} (see the log)", service.vip.to_string(),
                       service.port);
  }
  return {};
}

}  // namespace ferry::lifecycle
