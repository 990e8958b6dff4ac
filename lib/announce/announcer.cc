// The announcer's bookkeeping: one entry per VIP, its route added or removed when the plan and
// the kernel disagree, and the disagreement (an errno) kept for status until it is resolved.
#include "lib/announce/announcer.hh"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "lib/common/log.hh"
#include "lib/common/time_text.hh"

namespace ferry::announce {

using nlohmann::json;

Announcer::Announcer(const config::AnnounceConfig& config, metrics::Registry& registry,
                     const std::vector<net::IpAddress>* carried)
    : config_(config) {
  if (carried) {
    for (const net::IpAddress& vip : *carried) {
      Vip& v = vips_[vip.to_string()];
      v.plan.vip = vip;
      v.installed = true;
      v.installed_table = config_.table;
    }
    log::info("announce: {} announced VIP(s) taken over with their routes", carried->size());
  } else if (std::size_t stale = routes_.clear(std::nullopt); stale > 0) {
    log::notice("announce: removed {} route(s) of protocol ferry that an earlier ferryd left",
                stale);
  }
  metrics_ = registry.add([this](metrics::SnapshotBuilder& out) { collect(out); });
}

Announcer::~Announcer() {
  metrics_.reset();
  std::lock_guard lock(mutex_);
  withdrawn_ = true;
  for (auto& [key, v] : vips_) {
    if (!v.installed) continue;
    if (int err = routes_.change(RouteChange::remove, v.plan.vip, v.installed_table); err != 0) {
      log::error("announce: withdrawing {} from table {}: {}; `ferryd --withdraw` removes it", key,
                 v.installed_table, std::strerror(err));
    }
  }
}

std::vector<net::IpAddress> Announcer::announced_vips() const {
  std::lock_guard lock(mutex_);
  std::vector<net::IpAddress> out;
  for (const auto& [key, v] : vips_) {
    if (v.in_kernel() && v.installed_table == config_.table) out.push_back(v.plan.vip);
  }
  return out;
}

void Announcer::release() {
  std::lock_guard lock(mutex_);
  withdrawn_ = true;
  vips_.clear();
}

void Announcer::set_before_announcing(BeforeAnnouncing hook) {
  std::lock_guard lock(mutex_);
  before_announcing_ = std::move(hook);
}

// Tells before_announcing_ of the VIPs apply() is about to add, once each.
void Announcer::before_adding(std::chrono::steady_clock::time_point now) {
  std::vector<net::IpAddress> announcing;
  for (auto& [key, v] : vips_) {
    if (!wanted(v, now) && !v.installed) v.reset_issued = false;  // the next time counts again
    if (!wanted(v, now) || v.installed || v.reset_issued) continue;
    v.reset_issued = true;
    announcing.push_back(v.plan.vip);
  }
  if (before_announcing_ && !announcing.empty()) before_announcing_(announcing);
}

void Announcer::configure(const config::AnnounceConfig& config) {
  std::lock_guard lock(mutex_);
  if (config.table != config_.table) {
    log::notice("announce: moving the VIP routes from table {} to table {}", config_.table,
                config.table);
  }
  config_ = config;
}

// One VIP towards what it should be: installed in config_.table exactly when wanted.
void Announcer::apply(const std::string& key, Vip& v, std::chrono::steady_clock::time_point now) {
  const bool want = wanted(v, now);
  if (v.installed && (!want || v.installed_table != config_.table)) {
    if (int err = routes_.change(RouteChange::remove, v.plan.vip, v.installed_table); err != 0) {
      refused(key, v,
              fmt::format("removing the route from table {}: {}", v.installed_table,
                          std::strerror(err)));
      return;
    }
    v.installed = false;
    v.missing = false;
    ++removed_;
    v.error.clear();
    if (!want) {
      v.since = std::chrono::system_clock::now();
      log::notice("announce: {} withdrawn from table {}: {}", key, v.installed_table,
                  withdrawn_ ? "ferryd is stopping" : v.plan.reason);
    }
  }
  if (want && !v.installed) {
    if (int err = routes_.change(RouteChange::add, v.plan.vip, config_.table); err != 0) {
      refused(key, v,
              fmt::format("adding the route to table {}: {}", config_.table, std::strerror(err)));
      return;
    }
    v.installed = true;
    v.installed_table = config_.table;
    v.reset_issued = false;
    ++added_;
    v.error.clear();
    v.since = std::chrono::system_clock::now();
    log::notice("announce: {} announced in table {}: {}", key, config_.table, v.plan.reason);
  }
}

void Announcer::refused(const std::string& key, Vip& v, std::string error, bool log_repeats) {
  ++errors_;
  if (log_repeats || error != v.error) log::error("announce: {}: {}; retried in a few seconds", key, error);
  v.error = std::move(error);
}

void Announcer::update(std::vector<VipPlan> plan) {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  std::map<std::string, VipPlan> next;
  for (auto& p : plan) {
    std::string key = p.vip.to_string();
    next.emplace(std::move(key), std::move(p));
  }
  for (auto& [key, v] : vips_) {
    v.unplanned = !next.contains(key);
    if (v.unplanned) {
      v.plan.announce = false;
      v.plan.reason = "no service has this VIP any more";
    }
  }
  for (auto& [key, p] : next) {
    Vip& v = vips_[key];
    // The view it would be announced with: settling starts over whenever it changes.
    if (!p.announce || v.installed) {
      v.settling = false;
    } else if (!v.settling) {
      v.settling = true;
      v.settling_started = v.settling_since = now;
    } else if (p.usable != v.plan.usable) {
      v.settling_since = now;
    }
    v.plan = std::move(p);
  }
  before_adding(now);
  for (auto it = vips_.begin(); it != vips_.end();) {
    apply(it->first, it->second, now);
    bool gone = it->second.unplanned && !it->second.installed;
    it = gone ? vips_.erase(it) : std::next(it);
  }
}

std::optional<std::chrono::steady_clock::time_point> Announcer::next_settled() const {
  std::lock_guard lock(mutex_);
  std::optional<std::chrono::steady_clock::time_point> due;
  for (const auto& [key, v] : vips_) {
    if (!v.settling || v.installed || withdrawn_) continue;
    auto at =
        std::min(v.settling_since + settle_of(v), v.settling_started + kSettleCap * settle_of(v));
    if (!due || at < *due) due = at;
  }
  return due;
}

std::chrono::milliseconds Announcer::settle_of(const Vip& v) const {
  return std::chrono::milliseconds(config_.settle_ms ? *config_.settle_ms
                                                     : 2 * v.plan.longest_check_interval_ms);
}

bool Announcer::wanted(const Vip& v, std::chrono::steady_clock::time_point now) const {
  if (!v.plan.announce || withdrawn_) return false;
  return v.installed || (v.settling && (now - v.settling_since >= settle_of(v) ||
                                        now - v.settling_started >= kSettleCap * settle_of(v)));
}

void Announcer::reconcile() {
  std::lock_guard lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  before_adding(now);
  std::vector<net::IpAddress> restored;
  for (auto& [key, v] : vips_) {
    if (v.installed && wanted(v, now) && v.installed_table == config_.table) {
      int err = routes_.change(RouteChange::ensure, v.plan.vip, config_.table);
      if (err == 0) {
        ++restored_;
        restored.push_back(v.plan.vip);
        log::warning(
            "announce: the route to {} had been removed from table {} by someone "
            "else; added again",
            key, config_.table);
      }
      if (err == 0 || err == EEXIST) {
        v.missing = false;
        v.error.clear();
        continue;
      }
      // Gone, and the kernel refuses it back (e.g. the loopback is down): not announced now.
      v.missing = true;
      refused(key, v,
              fmt::format("adding back the route to table {}: {}", config_.table,
                          std::strerror(err)),
              false);
      continue;
    }
    apply(key, v, now);
  }
  // Withdrawn while it was gone: the flows the router sent elsewhere meanwhile start over too.
  if (before_announcing_ && !restored.empty()) before_announcing_(restored);
}

std::size_t Announcer::withdraw_all(const std::string& reason) {
  std::lock_guard lock(mutex_);
  withdrawn_ = true;
  std::size_t announced = 0;
  for (auto& [key, v] : vips_) {
    announced += v.installed;
    v.plan.reason = reason;
    apply(key, v, std::chrono::steady_clock::now());
  }
  return announced;
}

bool Announcer::announced(const net::IpAddress& vip) const {
  std::lock_guard lock(mutex_);
  auto it = vips_.find(vip.to_string());
  return it != vips_.end() && it->second.in_kernel();
}

json Announcer::report() const {
  std::lock_guard lock(mutex_);
  json vips = json::array();
  for (const auto& [key, v] : vips_) {
    std::string reason = v.plan.reason;
    if (v.settling && !v.installed && !withdrawn_) {
      reason =
          fmt::format("can serve; announced once its backends' health has held still for {} ms",
                      settle_of(v).count());
    }
    vips.push_back(
        {{"vip", key},
         {"announced", v.in_kernel()},
         {"services", v.plan.services},
         {"reason", std::move(reason)},
         {"since", iso8601_utc(v.since)},
         {"error", v.error.empty() ? json() : json(v.error)}});
  }
  return {{"table", config_.table},
          {"protocol", kRouteProtocol},
          {"min_backends", config_.min_backends},
          {"withdrawn", withdrawn_},
          {"vips", std::move(vips)}};
}

void Announcer::collect(metrics::SnapshotBuilder& out) const {
  std::lock_guard lock(mutex_);
  const char* announced =
      "1 while the VIP's host route is in the announce table (so the routing daemon announces "
      "it), 0 while it is withdrawn.";
  out.declare("ferry_announce_vip_announced", announced, metrics::Type::gauge);
  for (const auto& [key, v] : vips_) {
    if (!routable(v.plan.vip)) continue;
    out.gauge("ferry_announce_vip_announced", announced, {{"vip", key}}, v.in_kernel() ? 1 : 0);
  }
  const char* help = "Changes made to the announce table's routes, by kind.";
  out.counter("ferry_announce_route_changes_total", help, {{"change", "add"}},
              static_cast<double>(added_));
  out.counter("ferry_announce_route_changes_total", help, {{"change", "remove"}},
              static_cast<double>(removed_));
  out.counter("ferry_announce_route_changes_total", help, {{"change", "restore"}},
              static_cast<double>(restored_));
  out.counter("ferry_announce_route_errors_total",
              "Route changes the kernel refused (retried; status says why).", {},
              static_cast<double>(errors_));
}

}  // namespace ferry::announce
