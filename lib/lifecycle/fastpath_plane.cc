// The AF_XDP fast path as a plane (see fastpath_plane.hh).
#include "lib/lifecycle/fastpath_plane.hh"

#include <boost/asio/post.hpp>
#include <stdexcept>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/fastpath/flow_table.hh"

namespace ferry::lifecycle {

AfXdpPlane::AfXdpPlane(PlaneContext context, XdpProgramPlane& xdp,
                       std::function<void()> interface_returned)
    : context_(context), xdp_(xdp), interface_returned_(std::move(interface_returned)) {}

void AfXdpPlane::start(const config::Config& config, handover::OfferPart* handed) {
  if (handed) {
    const nlohmann::json resets = handed->fields.value("flows_reset_ms", nlohmann::json::object());
    for (const auto& [vip, ms] : resets.items()) flows_reset_ms_[vip] = ms.get<std::uint32_t>();
    if (handed->fields.contains("workers")) handed_ = fastpath::handed_over_from(*handed);
  }
  try {
    prepare(config);
    ApplyNotes notes;
    commit(config, notes);
  } catch (...) {
    if (handed) release();  // what the running ferryd serves stays as it is
    stop();
    throw;
  }
  handed_.reset();
}

void AfXdpPlane::serve(handover::OfferPart* paused) {
  if (!paused) return;
  const auto paused_at_ns = paused->fields.value("paused_at_ns", std::uint64_t{0});
  std::vector<fastpath::WorkerCarry> carries = fastpath::unpack(paused->bytes);
  // Carries come only for a handed-over plane; without them (the running ferryd had no fast
  // path) start() bound one afresh, which serves already.
  const bool adopted = plane_ && !carries.empty();
  if (adopted) plane_->start_handed_over(carries);
  const std::uint64_t running_ns = handover::shared_clock_ns();
  pause_us_ = paused_at_ns ? static_cast<double>(running_ns - paused_at_ns) / 1000.0 : 0;
  if (adopted) plane_->serve_handed_over();
}

void AfXdpPlane::prepare(const config::Config& next) {
  if (next.xdp.interfaces.empty()) return;
  fastpath::FastpathPlane::check_tables(next);
  // An interface that is not there (deleted, not re-created yet) fails here, before the running
  // fast path is taken down: its other ports keep serving, and the link watch re-binds on return.
  if (!(plane_ && plane_->serves_layout_of(next.xdp))) {
    fastpath::resolve_layout(next.xdp, fastpath::system_interface_facts());
  }
}

void AfXdpPlane::commit(const config::Config& next, ApplyNotes&) {
  const bool keep_sockets = plane_ && plane_->serves_layout_of(next.xdp);
  if (keep_sockets) {
    plane_->apply(next);
  } else {
    plane_.reset();
  }
  xdp_.apply(next);
  if (!keep_sockets && !next.xdp.interfaces.empty()) {
    xdp::XdpMapFds maps = xdp_.plane()->program()->map_fds();
    fastpath::XskMapFds map_fds{maps.ifslots, maps.xsks};
    if (handed_) {
      // A takeover: the running ferryd's sockets and UMEM; the workers start in the pause.
      fastpath::HandedOverFastpath handed = std::move(*handed_);
      handed_.reset();
      plane_ = std::make_unique<fastpath::FastpathPlane>(context_.io, context_.registry, map_fds,
                                                         next, hooks(), std::move(handed));
    } else {
      plane_ = std::make_unique<fastpath::FastpathPlane>(context_.io, context_.registry, map_fds,
                                                         next, hooks());
    }
  }
  follow_links();
}

fastpath::FastpathHooks AfXdpPlane::hooks() {
  fastpath::FastpathHooks hooks;
  hooks.enroll_heartbeat = [this](const std::string& name) -> std::function<void()> {
    std::shared_ptr<Heartbeat> beat = context_.heartbeats.enroll(name, "xdp");
    return [beat] { beat->beat(); };
  };
  // Down and disabled backends leave the Maglev tables, and their flows move; the daemon
  // rebuilds them on health transitions and the operator's changes.
  hooks.backend_up = [this](const std::string& service, const net::Endpoint& backend) {
    return context_.health.state(service, backend)->up.load(std::memory_order_relaxed) &&
           admin::keeps_flows(context_.admin, service, backend);
  };
  hooks.flows_reset_ms = [this](const net::IpAddress& vip) -> std::optional<std::uint32_t> {
    auto it = flows_reset_ms_.find(vip.to_string());
    if (it == flows_reset_ms_.end()) return std::nullopt;
    return it->second;
  };
  // Past FERRY_MAX_SERVICES the maps refuse the config anyway: no hint then.
  hooks.steering_id = [this](const std::string& service) -> std::optional<std::uint32_t> {
    xdp::XdpPlane* xdp = xdp_.plane();
    if (xdp == nullptr) return std::nullopt;
    try {
      return xdp->service_id(service);
    } catch (const std::runtime_error&) {
      return std::nullopt;
    }
  };
  return hooks;
}

// The watch learns the ifindexes just bound; a deletion it reports leaves the plane as it is (the
// port's sockets are dead, the others serve) until the interface returns.
void AfXdpPlane::follow_links() {
  if (!link_watch_ && plane_) {
    link_watch_ = std::make_unique<fastpath::LinkWatch>(
        context_.io, context_.registry,
        [this](const auto&) {
          // Not from inside the watch's handler: the re-bind replaces the plane and follows again.
          boost::asio::post(context_.io, interface_returned_);
        },
        [this] {
          if (plane_) plane_->refresh_ports();  // an MTU may have changed
        });
  }
  if (!link_watch_) return;
  std::vector<std::pair<std::string, int>> bound;
  if (plane_) {
    for (const auto& port : plane_->layout().ports) bound.emplace_back(port.ifname, port.ifindex);
  }
  link_watch_->follow(bound);
}

void AfXdpPlane::stop() {
  link_watch_.reset();
  plane_.reset();  // workers joined, XSKMAP emptied, sockets and UMEM gone
  handed_.reset();
}

void AfXdpPlane::describe(handover::OfferPart& part) {
  if (plane_) fastpath::describe(plane_->hand_over(), part);
  part.fields["flows_reset_ms"] = flows_reset_ms_;
}

void AfXdpPlane::pause(handover::OfferPart& part) {
  std::vector<fastpath::WorkerCarry> carries;
  if (plane_) carries = plane_->stop_for_handover();
  part.bytes = fastpath::pack(carries);
  part.fields["paused_at_ns"] = handover::shared_clock_ns();
}

void AfXdpPlane::release() {
  if (plane_) plane_->handed_over();
  link_watch_.reset();
  plane_.reset();
}

void AfXdpPlane::drop_paused() {
  if (!plane_) return;
  plane_->handed_over();  // leave the XSKMAP entries to the re-bind
  plane_.reset();
}

void AfXdpPlane::rebuild_tables(std::string_view why) {
  if (!plane_) return;
  try {
    auto started = std::chrono::steady_clock::now();
    plane_->refresh_backends();
    log::info("fast path: {}; tables rebuilt in {:.1f} ms (generation {})", why,
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
                  .count(),
              plane_->table_generation());
  } catch (const std::exception& e) {
    log::error("fast path: rebuilding the tables ({}) failed, the previous ones stay: {}", why,
               e.what());
  }
}

// The flows another host carried meanwhile may have other backends there than this host's flow
// table remembers; Maglev (the same on every host with the same view) decides them afresh. The
// workers have the reset before the route goes in.
void AfXdpPlane::reset_flows(const std::vector<net::IpAddress>& vips) {
  if (!plane_) return;
  std::uint32_t now = fastpath::FlowTable::clock_ms();
  for (const auto& vip : vips) flows_reset_ms_[vip.to_string()] = now;
  rebuild_tables("flows of a VIP announced again forgotten");
}

void AfXdpPlane::forget_old_resets(std::uint32_t idle_timeout_ms) {
  if (!plane_) return;
  const std::uint32_t now = fastpath::FlowTable::clock_ms();
  bool dropped = std::erase_if(flows_reset_ms_,
                               [&](const auto& r) { return now - r.second > idle_timeout_ms; }) > 0;
  if (dropped) rebuild_tables("flow resets past the idle timeout dropped");
}

}  // namespace ferry::lifecycle
