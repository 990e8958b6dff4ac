// Applying a configuration to the data plane: the XDP program and maps, and the AF_XDP fast path,
// in the order that keeps traffic flowing through a reload.
#include "lib/lifecycle/daemon_state.hh"

namespace ferry::lifecycle {

// Same sockets (interfaces, queues, UMEM and ring sizes unchanged): the workers' tables are
// rebuilt and published first, then the XDP maps, so a service this reload adds is known to the
// workers before XDP steers its first frame to them; no socket is touched and frames in flight
// stay in flight. Different sockets: the fast path is taken down before the program may change
// (its maps hold the sockets), the program is brought in line, and a new fast path is bound.
void Daemon::State::apply_data_plane(const config::Config& next) {
  bool keep_sockets = fastpath && fastpath->serves_layout_of(next.xdp);
  if (!next.xdp.interfaces.empty()) fastpath::FastpathPlane::check_tables(next);
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
    fastpath = std::make_unique<fastpath::FastpathPlane>(
        io, registry, fastpath::XskMapFds{maps.ifslots, maps.xsks}, next, std::move(hooks));
  }
}

}  // namespace ferry::lifecycle
