// Keeps the kernel table in line with the announce plan: routes added for the VIPs that may be
// announced, removed for the others, failures retried, and every change logged and counted.
// Owns the routes it installed: destroying it withdraws them (a handover would release them).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "lib/announce/announce_plan.hh"
#include "lib/announce/host_routes.hh"
#include "lib/config/config.hh"
#include "lib/metrics/registry.hh"

namespace ferry::announce {

class Announcer {
 public:
  // Clears the routes of protocol ferry an earlier ferryd left in any table (logged): ferry's
  // protocol is its own, one announcing ferryd per network namespace. Throws std::system_error
  // when the tables cannot be read or cleared.
  // A handover passes `carried`: the VIPs the previous ferryd announced in config.table, whose
  // routes stay and are this announcer's from now on; nothing is cleared then.
  Announcer(const config::AnnounceConfig& config, metrics::Registry& registry,
            const std::vector<net::IpAddress>* carried = nullptr);
  ~Announcer();  // withdraws what it announced
  Announcer(const Announcer&) = delete;
  Announcer& operator=(const Announcer&) = delete;

  // A reload: a new table gets the routes (the old one loses them on the next update).
  void configure(const config::AnnounceConfig& config);
  const config::AnnounceConfig& config() const { return config_; }
  // Called (with the mutex held: it must not call back) with the VIPs about to be announced,
  // before their routes go in, once per announcement however often the add is retried; and
  // with routes found gone and put back by reconcile(), after. Must not throw.
  using BeforeAnnouncing = std::function<void(const std::vector<net::IpAddress>& vips)>;
  void set_before_announcing(BeforeAnnouncing hook);
  // Adds and removes routes to match `plan`; what fails stays pending for the next update.
  // After withdraw_all() every VIP stays withdrawn whatever the plan says. A VIP that becomes
  // announceable waits for its usable backends to hold still for settle_ms (at most
  // kSettleCap times that since it first could, so a flapping backend cannot keep it out).
  void update(std::vector<VipPlan> plan);
  static constexpr int kSettleCap = 4;
  // When the next VIP waiting for its backends' health to settle may be announced (the caller
  // calls update() again then), if any waits.
  std::optional<std::chrono::steady_clock::time_point> next_settled() const;
  // Re-adds an announced route someone else removed (once per call, without touching routes
  // that are there), and retries pending changes. Called from a timer.
  void reconcile();
  // Stop: withdraws every VIP for `reason`; returns how many were announced.
  std::size_t withdraw_all(const std::string& reason);

  // A handover, old side: the VIPs announced now, and then forgetting them without withdrawing
  // (the successor owns the routes; this announcer changes nothing any more).
  std::vector<net::IpAddress> announced_vips() const;
  void release();

  // Whether `vip`'s route is in (announced now).
  bool announced(const net::IpAddress& vip) const;

  // {"table", "protocol", "min_backends", "withdrawn", "vips": [{vip, announced, services,
  // reason, since, error}]}
  nlohmann::json report() const;

 private:
  struct Vip {
    VipPlan plan;
    bool installed = false;  // our route is in config_.table (as far as we know)
    bool missing = false;    // installed, but found gone and refused back by the kernel
    bool in_kernel() const { return installed && !missing; }  // announced, as status says
    std::uint32_t installed_table = 0;
    std::chrono::system_clock::time_point since = std::chrono::system_clock::now();
    std::string error;  // the last failed change, empty when in line
    // Announceable but not announced yet: since when, and since when with the same usable
    // backends.
    bool settling = false;
    std::chrono::steady_clock::time_point settling_started;
    std::chrono::steady_clock::time_point settling_since;
    bool reset_issued = false;  // before_announcing told of it; its route not in yet
    bool unplanned = false;     // no service has it any more: forgotten once its route is gone
  };
  void before_adding(std::chrono::steady_clock::time_point now);
  std::chrono::milliseconds settle_of(const Vip& v) const;
  bool wanted(const Vip& v, std::chrono::steady_clock::time_point now) const;
  void apply(const std::string& key, Vip& v, std::chrono::steady_clock::time_point now);
  // A change the kernel refused: counted, kept for status, and logged (a check reconcile() repeats
  // every few seconds only when it is news).
  void refused(const std::string& key, Vip& v, std::string error, bool log_repeats = true);
  void collect(metrics::SnapshotBuilder& out) const;

  mutable std::mutex mutex_;
  config::AnnounceConfig config_;
  HostRoutes routes_;
  std::map<std::string, Vip> vips_;  // by VIP text; VIPs no longer planned stay until removed
  bool withdrawn_ = false;
  BeforeAnnouncing before_announcing_;
  std::uint64_t added_ = 0, removed_ = 0, restored_ = 0, errors_ = 0;
  metrics::Registry::Handle metrics_;
};

}  // namespace ferry::announce
