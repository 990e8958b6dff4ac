// The SO_MARKs of health checks through the tunnel: each backend address an encapsulating
// service with health checks sends to, per forwarding (ipip, gue), gets one mark in ferry's
// reserved range; bpf/ferry_hc.bpf.c finds the backend and its outer header by it.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>

#include "bpf/ferry_hc_shared.h"
#include "lib/common/net.hh"
#include "lib/config/config.hh"

namespace ferry::health {

inline constexpr std::uint32_t kTunnelMarkBase = FERRY_HC_MARK_BASE;
inline constexpr std::uint32_t kTunnelMarkMask = FERRY_HC_MARK_MASK;
inline constexpr std::uint32_t kMaxTunnels = FERRY_HC_MAX_TUNNELS;

// One tunnel: the outer header's kind and the backend it goes to. The outer source and the GUE
// port are xdp.encap's, the same for every tunnel.
struct TunnelKey {
  config::Forwarding forwarding = config::Forwarding::ipip;  // ipip or gue
  net::IpAddress backend;
  auto operator<=>(const TunnelKey&) const = default;
};

// The tunnels the checks of `services` go through: every backend of a proxy-mode service with
// `health` and forwarding ipip or gue.
std::set<TunnelKey> tunnel_keys(std::span<const config::ServiceConfig> services);

// Marks, kept across reloads: a tunnel that stays keeps its mark, so a check in flight while the
// program's map is rewritten still goes where it went; a new one takes the lowest free mark.
class TunnelMarks {
 public:
  // Gives every key a mark and forgets the others. Throws std::runtime_error, changing nothing,
  // when there are more than kMaxTunnels.
  void assign(const std::set<TunnelKey>& keys);
  std::optional<std::uint32_t> mark_of(const TunnelKey& key) const;
  const std::map<TunnelKey, std::uint32_t>& marks() const { return marks_; }

 private:
  std::map<TunnelKey, std::uint32_t> marks_;
};

// Whether `mark` is in ferry's reserved range (then the program takes the packet).
constexpr bool is_tunnel_mark(std::uint32_t mark) {
  return (mark & kTunnelMarkMask) == kTunnelMarkBase && (mark & ~kTunnelMarkMask) != 0;
}

}  // namespace ferry::health
