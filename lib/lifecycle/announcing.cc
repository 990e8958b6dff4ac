// Announcing the VIPs this host can serve (lib/announce): the announcer follows the config, the
// health board and the admin board, re-checks its routes on a timer, and withdraws first on stop.
#include <boost/asio/post.hpp>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/fastpath/flow_table.hh"
#include "lib/lifecycle/daemon_state.hh"

namespace ferry::lifecycle {
namespace {

constexpr std::chrono::seconds kAnnounceReconcilePeriod{5};

void arm_reconcile(Daemon::State& s) {
  s.announce_timer.expires_after(kAnnounceReconcilePeriod);
  s.announce_timer.async_wait([&s](const boost::system::error_code& ec) {
    if (ec || !s.announcer) return;
    s.announcer->reconcile();
    s.refresh_announcements();
    arm_reconcile(s);
  });
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
  announcer = std::make_unique<announce::Announcer>(*next.announce, registry);
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
      });
  // A VIP announced again after a withdrawal: the flows another host carried meanwhile may have
  // other backends there than this host's flow table remembers; Maglev (the same on every host
  // with the same view) decides them afresh. The workers have the reset before the route goes in.
  announcer->update(std::move(plan), [this](const std::vector<net::IpAddress>& vips) {
    if (!fastpath) return;
    std::uint32_t now = fastpath::FlowTable::clock_ms();
    for (const auto& vip : vips) flows_reset_ms[vip.to_string()] = now;
    fastpath->refresh_backends();
  });
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

void Daemon::State::register_announce_command() {
  commands.add("announce", control::Access::read,
               "the VIPs this host announces through the routing daemon, and why",
               [this](const nlohmann::json&, const control::Peer&) {
                 return announcer ? announcer->report() : nlohmann::json{{"enabled", false}};
               });
}

}  // namespace ferry::lifecycle
