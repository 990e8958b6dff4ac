// Which configured route (prefix -> egress interface) a packet's destination falls in: longest
// prefix wins. Built from the config off the hot path, then immutable.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

struct RouteEntry {
  net::Prefix prefix;
  std::uint32_t egress_port = 0;  // the caller's port id for `via`
  bool udp = false;
  bool tcp = false;
};

class RouteTable {
 public:
  RouteTable() = default;
  // `port_of` maps a route's `via` interface name to the caller's port id; nullopt throws
  // std::invalid_argument (the config validator already requires `via` to be an XDP interface).
  static RouteTable build(
      std::span<const config::RouteConfig> routes,
      const std::function<std::optional<std::uint32_t>(std::string_view)>& port_of);

  // The most specific route for p's destination and protocol, or nullptr.
  const RouteEntry* lookup(const ParsedPacket& p) const noexcept;
  const std::vector<RouteEntry>& entries() const { return entries_; }

 private:
  // A linear scan, longest prefix first, over masks precomputed as two 64-bit words: configs hold
  // a handful of routes, for which this beats a trie. A full FIB would want DIR-24-8 instead.
  struct Compiled {
    std::uint64_t net[2];
    std::uint64_t mask[2];
    IpVersion version;
    bool udp;
    bool tcp;
  };
  std::vector<RouteEntry> entries_;  // most specific first
  std::vector<Compiled> compiled_;   // same order
};

}  // namespace ferry::packet
