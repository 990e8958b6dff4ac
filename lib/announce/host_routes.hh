// VIPs as host routes of ferry's own route protocol in one kernel routing table: what BIRD's
// kernel protocol (`kernel table N; learn;`), FRR's `ip import-table` and GoBGP's zebra import
// pick up and announce. Control thread (and `ferryd --withdraw`) only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lib/common/net.hh"
#include "lib/fastpath/rtnetlink.hh"

namespace ferry::announce {

// rtm_protocol of every route ferry installs; named "ferry" by the package in
// /etc/iproute2/rt_protos.d/ferry.conf, so `ip route show table 100 proto ferry` lists them.
inline constexpr std::uint8_t kRouteProtocol = 70;

// add: RTM_NEWROUTE, create or replace; ensure: create only if absent (EEXIST otherwise, and no
// change the routing daemon would see); remove: RTM_DELROUTE.
enum class RouteChange { add, ensure, remove };

// The request for `vip`/32 or /128 through `oif` (the loopback) in `table`, unicast, scope host
// for IPv4, protocol ferry. Pure: unit-tested on bytes.
std::vector<std::uint8_t> host_route_request(RouteChange change, const net::IpAddress& vip,
                                             std::uint32_t table, int oif);

class HostRoutes {
 public:
  // Throws std::system_error when no netlink socket can be had or there is no loopback.
  HostRoutes();

  // ferry's routes in `table` (every table: nullopt), read from the kernel.
  std::vector<net::IpAddress> list(std::optional<std::uint32_t> table);
  struct Listed {
    net::IpAddress vip;
    std::uint32_t table;
  };
  std::vector<Listed> list_with_tables(std::optional<std::uint32_t> table);
  // 0, or the errno the kernel refused the change with (EPERM without CAP_NET_ADMIN; EEXIST
  // for ensure when the route is there; ETIMEDOUT when it did not answer). Never throws.
  // Removing a route already gone is not an error.
  int change(RouteChange change, const net::IpAddress& vip, std::uint32_t table);
  // Removes ferry's routes from `table` (every table: nullopt); returns how many went. Throws
  // std::system_error naming the first route that could not be removed (after trying the rest),
  // or when the tables cannot be read.
  std::size_t clear(std::optional<std::uint32_t> table);

 private:
  fastpath::RtnetlinkSocket socket_;
  int loopback_ = 0;
};

}  // namespace ferry::announce
