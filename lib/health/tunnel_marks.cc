// Tunnel marks: which backends need one, and a stable assignment across reloads.
#include "lib/health/tunnel_marks.hh"

#include <fmt/format.h>

#include <stdexcept>

namespace ferry::health {

std::set<TunnelKey> tunnel_keys(std::span<const config::ServiceConfig> services) {
  std::set<TunnelKey> keys;
  for (const auto& s : services) {
    if (!s.health || s.mode != config::ServiceMode::proxy) continue;
    if (s.forwarding == config::Forwarding::nat) continue;
    for (const auto& b : s.backends) keys.insert({s.forwarding, b.address});
  }
  return keys;
}

void TunnelMarks::assign(const std::set<TunnelKey>& keys) {
  if (keys.size() > kMaxTunnels) {
    throw std::runtime_error(fmt::format(
        "health checks through the tunnel: {} (backend, forwarding) pairs, at most {} fit the "
        "reserved mark range",
        keys.size(), kMaxTunnels));
  }
  std::map<TunnelKey, std::uint32_t> next;
  std::set<std::uint32_t> taken;
  for (const auto& key : keys) {
    if (auto it = marks_.find(key); it != marks_.end()) {
      next.emplace(key, it->second);
      taken.insert(it->second);
    }
  }
  std::uint32_t candidate = kTunnelMarkBase + 1;
  for (const auto& key : keys) {
    if (next.contains(key)) continue;
    while (taken.contains(candidate)) ++candidate;
    next.emplace(key, candidate);
    taken.insert(candidate);
  }
  marks_ = std::move(next);
}

std::optional<std::uint32_t> TunnelMarks::mark_of(const TunnelKey& key) const {
  auto it = marks_.find(key);
  if (it == marks_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ferry::health
