// The announce rule, one VIP at a time: the weakest service on it decides.
#include "lib/announce/announce_plan.hh"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace ferry::announce {
namespace {

// What one service lacks, or nothing when it can serve; its usable backends go to `usable`.
std::string shortfall(const config::ServiceConfig& s, std::uint32_t min_backends,
                      const HealthLookup& health, bool announced,
                      std::vector<std::string>& usable_list) {
  if (s.mode != config::ServiceMode::proxy) return {};  // echo, reflect: served by ferry itself
  std::size_t usable = 0, down = 0, weightless = 0, unproven = 0;
  for (std::size_t i = 0; i < s.backends.size(); ++i) {
    BackendHealth h = health(s.name, s.backends[i]);
    if (s.weight(i) == 0) {
      ++weightless;
    } else if (!h.up) {
      ++down;
    } else if (s.health && !h.passed && !announced) {
      ++unproven;
    } else {
      ++usable;
      usable_list.push_back(s.name + " " + s.backends[i].to_string());
    }
  }
  if (usable >= min_backends) return {};
  std::vector<std::string> why;
  if (down) why.push_back(fmt::format("{} down", down));
  if (weightless) why.push_back(fmt::format("{} drained, disabled or weight 0", weightless));
  if (unproven) why.push_back(fmt::format("{} without a passing check yet", unproven));
  std::string detail;
  for (const auto& w : why) detail += (detail.empty() ? "" : ", ") + w;
  return fmt::format("{}: {} of {} backends usable, {} needed{}", s.name, usable, s.backends.size(),
                     min_backends, detail.empty() ? "" : " (" + detail + ")");
}

}  // namespace

bool routable(const net::IpAddress& vip) {
  const auto& b = vip.bytes;
  if (vip.is_v4()) {
    bool unspecified = b[0] == 0 && b[1] == 0 && b[2] == 0 && b[3] == 0;
    // 224/4 multicast, 240/4 reserved (and the broadcast address)
    return !unspecified && b[0] != 127 && !(b[0] == 169 && b[1] == 254) && b[0] < 224;
  }
  bool zero_prefix = std::all_of(b.begin(), b.begin() + 15, [](std::uint8_t x) { return x == 0; });
  bool unspecified_or_loopback = zero_prefix && (b[15] == 0 || b[15] == 1);
  bool link_local = b[0] == 0xfe && (b[1] & 0xc0) == 0x80;
  bool multicast = b[0] == 0xff;
  // ::ffff:0:0/96, IPv4-mapped: never on the wire
  bool mapped = std::all_of(b.begin(), b.begin() + 10, [](std::uint8_t x) { return x == 0; }) &&
                b[10] == 0xff && b[11] == 0xff;
  return !unspecified_or_loopback && !link_local && !multicast && !mapped;
}

std::vector<VipPlan> plan_announcements(const config::Config& effective, std::uint32_t min_backends,
                                        const HealthLookup& health, const ServedLookup& not_served,
                                        const AnnouncedLookup& announced) {
  std::vector<VipPlan> plans;
  for (const auto& s : effective.services) {
    auto it =
        std::find_if(plans.begin(), plans.end(), [&](const VipPlan& p) { return p.vip == s.vip; });
    if (it == plans.end()) {
      plans.emplace_back();
      plans.back().vip = s.vip;
      plans.back().announce = routable(s.vip);
      it = plans.end() - 1;
    }
    it->services.push_back(s.name);
    if (!routable(s.vip)) continue;
    if (s.health) {
      it->longest_check_interval_ms =
          std::max(it->longest_check_interval_ms, s.health->interval_ms);
    }
    std::string lack = not_served ? not_served(s) : std::string();
    if (!lack.empty()) {
      lack = s.name + ": " + lack;
    } else {
      lack = shortfall(s, min_backends, health, announced && announced(s.vip), it->usable);
    }
    if (!lack.empty()) {
      it->announce = false;
      it->reason += (it->reason.empty() ? "" : "; ") + lack;
    }
  }
  for (auto& p : plans) {
    if (!routable(p.vip)) {
      p.reason = "a loopback, unspecified, link-local or multicast address is never announced";
    } else if (p.announce) {
      p.reason = fmt::format("every service on it can serve ({})", fmt::join(p.services, ", "));
    }
  }
  return plans;
}

}  // namespace ferry::announce
