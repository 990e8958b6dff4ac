// The kernel's routes out of the fast path's interfaces (main table, read over netlink): where a
// destination leaves and through which gateway. Longest prefix wins, then the lowest metric.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "lib/common/net.hh"
#include "lib/packet/parse.hh"

namespace ferry::fastpath {

struct KernelRoute {
  net::Prefix prefix;
  std::uint32_t port = 0;                 // the fast path's slot of the route's output interface
  std::optional<net::IpAddress> gateway;  // none: the destination is on the link
  std::uint32_t metric = 0;
};

inline constexpr std::uint32_t kAnyPort = ~0u;

class KernelRouteTable {
 public:
  KernelRouteTable() = default;
  explicit KernelRouteTable(std::vector<KernelRoute> routes);

  // The best route to `dst` (IpAddress::bytes layout), restricted to `port` unless kAnyPort;
  // nullptr when none. A linear scan: a gateway's routes out of its XDP ports are a handful.
  const KernelRoute* lookup(const std::array<std::uint8_t, 16>& dst, packet::IpVersion version,
                            std::uint32_t port = kAnyPort) const noexcept;
  const std::vector<KernelRoute>& routes() const { return routes_; }

 private:
  struct Compiled {
    std::uint64_t net[2];
    std::uint64_t mask[2];
    packet::IpVersion version;
    std::uint32_t port;
  };
  std::vector<KernelRoute> routes_;  // most specific first, then lowest metric
  std::vector<Compiled> compiled_;   // same order
};

}  // namespace ferry::fastpath
