// Host routes of protocol ferry over rtnetlink: built by hand (a dozen bytes of attributes), the
// kernel's answer read back so every refusal reaches the caller as an errno.
#include "lib/announce/host_routes.hh"

#include <fmt/format.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <cerrno>
#include <system_error>

namespace ferry::announce {

using fastpath::append_attribute;

std::vector<std::uint8_t> host_route_request(RouteChange change, const net::IpAddress& vip,
                                             std::uint32_t table, int oif) {
  const bool add = change != RouteChange::remove;
  std::vector<std::uint8_t> buf(NLMSG_ALIGN(NLMSG_LENGTH(sizeof(rtmsg))), 0);
  auto* rt = static_cast<rtmsg*>(NLMSG_DATA(reinterpret_cast<nlmsghdr*>(buf.data())));
  rt->rtm_family = static_cast<std::uint8_t>(vip.family);
  rt->rtm_dst_len = static_cast<std::uint8_t>(vip.max_prefix_len());
  rt->rtm_table = static_cast<std::uint8_t>(table < 256 ? table : RT_TABLE_UNSPEC);
  rt->rtm_protocol = kRouteProtocol;
  // IPv6 routes have no scope of their own. A deletion matches any scope: a route of protocol
  // ferry to the VIP in this table is ours whatever shape an older ferry gave it.
  rt->rtm_scope = !add ? RT_SCOPE_NOWHERE : vip.is_v4() ? RT_SCOPE_HOST : RT_SCOPE_UNIVERSE;
  rt->rtm_type = RTN_UNICAST;
  append_attribute(buf, RTA_DST, vip.bytes.data(), vip.is_v4() ? 4 : 16);
  append_attribute(buf, RTA_TABLE, &table, sizeof(table));
  append_attribute(buf, RTA_OIF, &oif, sizeof(oif));
  auto* h = reinterpret_cast<nlmsghdr*>(buf.data());
  h->nlmsg_len = static_cast<std::uint32_t>(buf.size());
  h->nlmsg_type = add ? RTM_NEWROUTE : RTM_DELROUTE;
  h->nlmsg_flags = NLM_F_REQUEST;
  if (change == RouteChange::add) h->nlmsg_flags |= NLM_F_CREATE | NLM_F_REPLACE;
  if (change == RouteChange::ensure) h->nlmsg_flags |= NLM_F_CREATE | NLM_F_EXCL;
  return buf;
}

HostRoutes::HostRoutes() : loopback_(static_cast<int>(::if_nametoindex("lo"))) {
  if (loopback_ == 0) {
    throw std::system_error(errno, std::generic_category(),
                            "announce: no loopback interface \"lo\" to put VIP routes on");
  }
}

std::vector<HostRoutes::Listed> HostRoutes::list_with_tables(std::optional<std::uint32_t> table) {
  std::vector<Listed> out;
  for (std::uint8_t family : {AF_INET, AF_INET6}) {
    socket_.dump(RTM_GETROUTE, family, [&](const nlmsghdr* h) {
      auto route = fastpath::parse_route(h);
      if (!route || route->protocol != kRouteProtocol) return;
      if (table && route->table != *table) return;
      if (route->prefix.length != route->prefix.address.max_prefix_len()) return;
      out.push_back({route->prefix.address, route->table});
    });
  }
  return out;
}

std::vector<net::IpAddress> HostRoutes::list(std::optional<std::uint32_t> table) {
  std::vector<net::IpAddress> out;
  for (const auto& r : list_with_tables(table)) out.push_back(r.vip);
  return out;
}

int HostRoutes::change(RouteChange change, const net::IpAddress& vip, std::uint32_t table) {
  auto request = host_route_request(change, vip, table, loopback_);
  int err = 0;
  try {
    err = socket_.transact(request);
  } catch (const std::system_error& e) {
    err = e.code().value();  // no answer within 5 s (rtnl held), or the socket failed
  }
  return change == RouteChange::remove && err == ESRCH ? 0 : err;
}

std::size_t HostRoutes::clear(std::optional<std::uint32_t> table) {
  std::size_t removed = 0;
  std::optional<std::system_error> failed;
  for (const auto& r : list_with_tables(table)) {
    if (int err = change(RouteChange::remove, r.vip, r.table); err != 0) {
      if (!failed) {
        failed.emplace(
            err, std::generic_category(),
            fmt::format("removing the route to {} from table {}", r.vip.to_string(), r.table));
      }
      continue;  // the others still go
    }
    ++removed;
  }
  if (failed) throw *failed;
  return removed;
}

}  // namespace ferry::announce
