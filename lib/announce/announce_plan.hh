// Which VIPs this host may announce: a VIP is announced while every service on it (each of its
// protocols, UDP and TCP) can serve, i.e. has at least announce.min_backends usable backends.
// Pure: config and health in, the plan out, so the rule is unit-tested.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"

namespace ferry::announce {

// A backend as the health checker sees it. `passed`: a check of it has passed since it was
// configured; a checked backend counts only then, so a host that has just started (or cannot
// reach its backends) does not attract traffic during the first `fall` intervals.
struct BackendHealth {
  bool up = true;
  bool passed = false;
};
using HealthLookup =
    std::function<BackendHealth(const std::string& service, const net::Endpoint& backend)>;
// Why this host cannot serve `service` itself whatever its backends (its TCP listener is not
// bound, the fast path is not running), or empty when it can.
using ServedLookup = std::function<std::string(const config::ServiceConfig& service)>;
// Whether the VIP is announced now: a backend without a passing check yet (health checks just
// added by a reload) does not withdraw a VIP that is announced.
using AnnouncedLookup = std::function<bool(const net::IpAddress& vip)>;

struct VipPlan {
  net::IpAddress vip;
  bool announce = false;
  std::vector<std::string> services;  // the services on this VIP, in config order
  std::string reason;                 // why it is announced or not, for status and the log
  // "service backend" of every usable backend: the view the VIP would be announced with.
  std::vector<std::string> usable;
  // The longest health check interval of its services (0: none is checked); announcing waits
  // for the view to hold still twice this long unless announce.settle_ms says otherwise.
  std::uint32_t longest_check_interval_ms = 0;
};

// `effective`: the running config with the operator's steering applied (drained and disabled
// backends weigh 0), so weight 0, down and not-yet-passed backends are not usable. One entry per
// distinct VIP, in config order; loopback, unspecified, link-local, multicast and IPv4-mapped VIPs
// are listed, never announced (they mean nothing to a router).
std::vector<VipPlan> plan_announcements(const config::Config& effective, std::uint32_t min_backends,
                                        const HealthLookup& health,
                                        const ServedLookup& not_served = {},
                                        const AnnouncedLookup& announced = {});

// Whether a VIP may be announced at all (not loopback, unspecified, link-local, multicast,
// reserved or IPv4-mapped).
bool routable(const net::IpAddress& vip);

}  // namespace ferry::announce
