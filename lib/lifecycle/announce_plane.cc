// Announcing the VIPs as a plane (see announce_plane.hh).
#include "lib/lifecycle/announce_plane.hh"

#include <boost/asio/post.hpp>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"

namespace ferry::lifecycle {
namespace {

constexpr std::chrono::seconds kAnnounceReconcilePeriod{5};

}  // namespace

AnnouncePlane::AnnouncePlane(PlaneContext context,
                             const std::shared_ptr<const config::Config>& running,
                             AfXdpPlane& fastpath, NotServed not_served)
    : context_(context),
      running_(running),
      fastpath_(fastpath),
      not_served_(std::move(not_served)) {}

void AnnouncePlane::start(const config::Config& config, handover::OfferPart* handed) {
  if (handed) {
    std::vector<net::IpAddress> vips;
    for (const auto& v : handed->fields.value("announced", nlohmann::json::array())) {
      if (auto ip = net::IpAddress::parse(v.get<std::string>())) vips.push_back(*ip);
    }
    carried_ = std::move(vips);
  }
  ApplyNotes notes;
  commit(config, notes);
  carried_.reset();
}

void AnnouncePlane::serve(handover::OfferPart*) {
  announcing_ = true;
  boost::asio::post(context_.io, [this] { refresh(); });
}

void AnnouncePlane::commit(const config::Config& next, ApplyNotes&) {
  if (!next.announce) {
    if (announcer_) {
      log::notice("announce: turned off; withdrawing every VIP");
      reconcile_timer_.cancel();
      settle_timer_.cancel();
      announcer_.reset();
    }
    return;
  }
  if (announcer_) {
    announcer_->configure(*next.announce);
    return;
  }
  announcer_ = std::make_unique<announce::Announcer>(*next.announce, context_.registry,
                                                     carried_ ? &*carried_ : nullptr);
  carried_.reset();
  announcer_->set_before_announcing(
      [this](const std::vector<net::IpAddress>& vips) { fastpath_.reset_flows(vips); });
  arm_reconcile();
}

void AnnouncePlane::arm_reconcile() {
  reconcile_timer_.expires_after(kAnnounceReconcilePeriod);
  reconcile_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !announcer_) return;
    announcer_->reconcile();
    refresh();
    fastpath_.forget_old_resets(running_->xdp.flows.idle_timeout_ms);
    arm_reconcile();
  });
}

void AnnouncePlane::refresh() {
  refresh_posted_.store(false);
  if (!announcer_ || !announcing_) return;
  const admin::AdminBoard& admin = context_.admin;
  health::HealthBoard& health = context_.health;
  auto plan = announce::plan_announcements(
      admin::effective_config(*running_, admin), announcer_->config().min_backends,
      [&health](const std::string& service, const net::Endpoint& backend) {
        auto state = health.state(service, backend);
        return announce::BackendHealth{.up = state->up.load(std::memory_order_relaxed),
                                       .passed = state->passed.load(std::memory_order_relaxed)};
      },
      not_served_, [this](const net::IpAddress& vip) { return announcer_->announced(vip); });
  announcer_->update(std::move(plan));
  // A VIP waiting for its backends' health to hold still is looked at again when it may go in.
  if (auto due = announcer_->next_settled()) {
    settle_timer_.expires_at(*due);
    settle_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) refresh();
    });
  }
}

void AnnouncePlane::post_refresh() {
  if (refresh_posted_.exchange(true)) return;
  boost::asio::post(context_.io, [this] { refresh(); });
}

std::size_t AnnouncePlane::withdraw_all() {
  announcing_ = false;
  reconcile_timer_.cancel();
  settle_timer_.cancel();
  return announcer_ ? announcer_->withdraw_all("ferryd is stopping") : 0;
}

nlohmann::json AnnouncePlane::report() const {
  return announcer_ ? announcer_->report() : nlohmann::json{{"enabled", false}};
}

void AnnouncePlane::stop() {
  announcing_ = false;
  reconcile_timer_.cancel();
  settle_timer_.cancel();
  announcer_.reset();
}

void AnnouncePlane::describe(handover::OfferPart& part) {
  nlohmann::json announced = nlohmann::json::array();
  if (announcer_) {
    for (const net::IpAddress& vip : announcer_->announced_vips()) {
      announced.push_back(vip.to_string());
    }
  }
  part.fields["announced"] = std::move(announced);
}

void AnnouncePlane::release() {
  if (announcer_) announcer_->release();
  stop();
}

}  // namespace ferry::lifecycle
