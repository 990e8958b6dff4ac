// Announcing the VIPs this host can serve (lib/announce): the announcer follows the config, the
// health board and the admin board, re-checks its routes on a timer, and withdraws first on stop.
#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/fastpath/flow_table.hh"
#include "lib/lifecycle/daemon_state.hh"

namespace ferry::lifecycle {
namespace {

constexpr std::chrono::seconds kAnnounceReconcilePeriod{5};

// A VIP announced again after a withdrawal: the flows another host carried meanwhile may have
// other backends there than this host's flow table remembers; Maglev (the same on every host
// with the same view) decides them afresh. The workers have the reset before the route goes in.
void reset_flows(Daemon::State& s, const std::vector<net::IpAddress>& vips) {
  if (!s.fastpath) return;
  std::uint32_t now = fastpath::FlowTable::clock_ms();
  for (const auto& vip : vips) s.flows_reset_ms[vip.to_string()] = now;
  s.rebuild_fastpath_tables("flows of a VIP announced again forgotten");
}

// A reset older than the flow idle timeout has no entry left to apply to: dropped, so that the
// 32-bit millisecond clock never wraps around to it.
void forget_old_resets(Daemon::State& s) {
  if (!s.fastpath) return;
  const std::uint32_t now = fastpath::FlowTable::clock_ms();
  const std::uint32_t timeout = s.config->xdp.flows.idle_timeout_ms;
  bool dropped =
      std::erase_if(s.flows_reset_ms, [&](const auto& r) { return now - r.second > timeout; }) > 0;
  if (dropped) s.rebuild_fastpath_tables("flow resets past the idle timeout dropped");
}

void arm_reconcile(Daemon::State& s) {
  s.announce_timer.expires_after(kAnnounceReconcilePeriod);
  s.announce_timer.async_wait([&s](const boost::system::error_code& ec) {
    if (ec || !s.announcer) return;
    s.announcer->reconcile();
    s.refresh_announcements();
    forget_old_resets(s);
    arm_reconcile(s);
  });
}

// Why this host cannot serve `service` itself, whatever its backends.
std::string not_served(const Daemon::State& s, const config::ServiceConfig& service) {
  bool udp = service.protocols.udp && service.mode != config::ServiceMode::echo;
  bool tcp = service.protocols.tcp && service.mode != config::ServiceMode::reflect;
  if (udp && !s.fastpath) return "the AF_XDP fast path is not running (see the log)";
  if (tcp && (!s.tcp || !s.tcp->bound_address(service.name))) {
    return fmt::format("not listening on {}:{} (see the log)", service.vip.to_string(),
                       service.port);
  }
  return {};
}

}  // namespace

void Daemon::State::apply_announce(const config::Config& next) {
  if (!next.announce) {
    if (announcer) {
      log::notice("announce: turned off; withdrawing every VIP");
      announce_timer.cancel();
      settle_timer.cancel();
      announcer.reset();
    }
    return;
  }
  if (announcer) {
    announcer->configure(*next.announce);
    return;
  }
  announcer = std::make_unique<announce::Announcer>(*next.announce, registry,
                                                    carried_vips ? &*carried_vips : nullptr);
  carried_vips.reset();
  announcer->set_before_announcing(
      [this](const std::vector<net::IpAddress>& vips) { reset_flows(*this, vips); });
  arm_reconcile(*this);
}

void Daemon::State::refresh_announcements() {
  announce_refresh_posted.store(false);
  if (!announcer || !announcing) return;
  auto plan = announce::plan_announcements(
      admin::effective_config(*config, admin), announcer->config().min_backends,
      [this](const std::string& service, const net::Endpoint& backend) {
        auto state = health.state(service, backend);
        return announce::BackendHealth{.up = state->up.load(std::memory_order_relaxed),
                                       .passed = state->passed.load(std::memory_order_relaxed)};
      },
      [this](const config::ServiceConfig& service) { return not_served(*this, service); },
      [this](const net::IpAddress& vip) { return announcer->announced(vip); });
  announcer->update(std::move(plan));
  // A VIP waiting for its backends' health to hold still is looked at again when it may go in.
  if (auto due = announcer->next_settled()) {
    settle_timer.expires_at(*due);
    settle_timer.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) refresh_announcements();
    });
  }
}

void Daemon::State::post_announce_refresh() {
  if (announce_refresh_posted.exchange(true)) return;
  boost::asio::post(io, [this] { refresh_announcements(); });
}

std::size_t Daemon::State::withdraw_announcements() {
  announcing = false;
  announce_timer.cancel();
  settle_timer.cancel();
  return announcer ? announcer->withdraw_all("ferryd is stopping") : 0;
}

nlohmann::json Daemon::State::announce_report() const {
  return announcer ? announcer->report() : nlohmann::json{{"enabled", false}};
}

}  // namespace ferry::lifecycle
