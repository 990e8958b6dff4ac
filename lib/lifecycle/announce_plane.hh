// Announcing the VIPs this host can serve (lib/announce) as one of the daemon's planes: the
// announcer follows the config, the health board and the admin board, re-checks its routes on a
// timer, and withdraws first on stop; a takeover carries the routes over without a withdrawal.
#pragma once

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/announce/announcer.hh"
#include "lib/lifecycle/fastpath_plane.hh"
#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"

namespace ferry::lifecycle {

class AnnouncePlane final : public Plane {
 public:
  // Why this host cannot serve a service itself, whatever its backends ("" when it can).
  using NotServed = std::function<std::string(const config::ServiceConfig&)>;
  // `running` is the daemon's running config (swapped on the control thread); the fast path's
  // flows to a VIP announced again are reset before its route goes in.
  AnnouncePlane(PlaneContext context, const std::shared_ptr<const config::Config>& running,
                AfXdpPlane& fastpath, NotServed not_served);

  std::string_view name() const override { return "announce"; }
  // Creates the announcer for `config` (none when announce is off), taking over the running
  // ferryd's routes when handed; nothing is announced before serve().
  void start(const config::Config& config, handover::OfferPart* handed) override;
  // Every plane serves: the VIPs may attract traffic (on the control thread, once it runs).
  void serve(handover::OfferPart* paused) override;
  // Creates, re-configures or removes the announcer (a failure rejects the reload).
  void commit(const config::Config& next, ApplyNotes& notes) override;
  // Its routes are withdrawn already (withdraw_all()), or handed over (release()).
  void stop() override;
  // The VIPs announced: the successor keeps their routes instead of replacing them.
  void describe(handover::OfferPart& part) override;
  // The routes are the successor's.
  void release() override;

  // Brings the routes in line with the running config, health and admin state (after start,
  // reload, `backend`, health transitions and first passing checks). Control thread;
  // post_refresh() from any thread.
  void refresh();
  void post_refresh();
  // The stop: withdraws every VIP, returning how many were announced.
  std::size_t withdraw_all();
  nlohmann::json report() const;
  const announce::Announcer* announcer() const { return announcer_.get(); }

 private:
  void arm_reconcile();

  PlaneContext context_;
  const std::shared_ptr<const config::Config>& running_;
  AfXdpPlane& fastpath_;
  NotServed not_served_;
  std::optional<std::vector<net::IpAddress>> carried_;  // a takeover's, until the announcer
  std::unique_ptr<announce::Announcer> announcer_;
  bool announcing_ = false;  // every plane serves, and no stop has withdrawn the VIPs
  std::atomic<bool> refresh_posted_{false};
  boost::asio::steady_timer reconcile_timer_{context_.io};  // every few seconds
  boost::asio::steady_timer settle_timer_{context_.io};  // the next VIP whose health view settles
};

}  // namespace ferry::lifecycle
