// The rtnetlink requests for ferry's host routes, on bytes: message type and flags per change,
// the rtmsg (family, /32 or /128, table, protocol 70, scope, unicast) and exactly three
// attributes (RTA_DST, RTA_TABLE, RTA_OIF); tables above 255 only in RTA_TABLE.
#include "lib/announce/host_routes.hh"

#include <gtest/gtest.h>
#include <linux/rtnetlink.h>

#include <cstring>
#include <map>
#include <vector>

#include "lib/fastpath/rtnetlink.hh"
#include "tests/unit/announce/addresses.hh"

namespace ferry::announce {
namespace {

struct Decoded {
  nlmsghdr header{};
  rtmsg route{};
  std::map<std::uint16_t, std::vector<std::uint8_t>> attributes;
  std::vector<std::uint16_t> order;
};

Decoded decode(const std::vector<std::uint8_t>& buf) {
  Decoded d;
  EXPECT_GE(buf.size(), NLMSG_LENGTH(sizeof(rtmsg)));
  std::memcpy(&d.header, buf.data(), sizeof(nlmsghdr));
  EXPECT_EQ(d.header.nlmsg_len, buf.size());
  std::memcpy(&d.route, buf.data() + NLMSG_HDRLEN, sizeof(rtmsg));
  std::size_t at = NLMSG_ALIGN(NLMSG_LENGTH(sizeof(rtmsg)));
  while (at + sizeof(rtattr) <= buf.size()) {
    rtattr a;
    std::memcpy(&a, buf.data() + at, sizeof(a));
    EXPECT_GE(a.rta_len, sizeof(rtattr));
    EXPECT_LE(at + a.rta_len, buf.size());
    if (a.rta_len < sizeof(rtattr) || at + a.rta_len > buf.size()) break;
    const std::uint8_t* data = buf.data() + at + RTA_LENGTH(0);
    d.attributes[a.rta_type].assign(data, data + (a.rta_len - RTA_LENGTH(0)));
    d.order.push_back(a.rta_type);
    at += RTA_ALIGN(a.rta_len);
  }
  EXPECT_EQ(at, buf.size()) << "trailing bytes";
  return d;
}

std::uint32_t u32(const std::vector<std::uint8_t>& bytes) {
  EXPECT_EQ(bytes.size(), 4u);
  std::uint32_t v = 0;
  std::memcpy(&v, bytes.data(), std::min<std::size_t>(bytes.size(), 4));
  return v;
}

TEST(HostRouteRequest, ProtocolIsSeventy) {
  EXPECT_EQ(kRouteProtocol, 70);
}

TEST(HostRouteRequest, AddIsACreateOrReplaceOfAnIpv4HostRouteOnTheLoopback) {
  auto buf = host_route_request(RouteChange::add, ip("10.0.0.10"), 100, 1);
  // 16 (nlmsghdr) + 12 (rtmsg) + three attributes of 8 bytes.
  EXPECT_EQ(buf.size(), 52u);
  Decoded d = decode(buf);
  EXPECT_EQ(d.header.nlmsg_type, RTM_NEWROUTE);
  EXPECT_EQ(d.header.nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE);
  EXPECT_EQ(d.route.rtm_family, AF_INET);
  EXPECT_EQ(d.route.rtm_dst_len, 32);
  EXPECT_EQ(d.route.rtm_src_len, 0);
  EXPECT_EQ(d.route.rtm_tos, 0);
  EXPECT_EQ(d.route.rtm_table, 100);
  EXPECT_EQ(d.route.rtm_protocol, 70);
  EXPECT_EQ(d.route.rtm_scope, RT_SCOPE_HOST);
  EXPECT_EQ(d.route.rtm_type, RTN_UNICAST);
  EXPECT_EQ(d.route.rtm_flags, 0u);
  EXPECT_EQ(d.order, (std::vector<std::uint16_t>{RTA_DST, RTA_TABLE, RTA_OIF}));
  EXPECT_EQ(d.attributes[RTA_DST], (std::vector<std::uint8_t>{10, 0, 0, 10}));
  EXPECT_EQ(u32(d.attributes[RTA_TABLE]), 100u);
  EXPECT_EQ(u32(d.attributes[RTA_OIF]), 1u);
}

TEST(HostRouteRequest, EnsureCreatesOnlyIfAbsent) {
  Decoded d = decode(host_route_request(RouteChange::ensure, ip("10.0.0.10"), 100, 1));
  EXPECT_EQ(d.header.nlmsg_type, RTM_NEWROUTE);
  EXPECT_EQ(d.header.nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  EXPECT_EQ(d.route.rtm_scope, RT_SCOPE_HOST);
  EXPECT_EQ(d.route.rtm_protocol, 70);
}

TEST(HostRouteRequest, RemoveIsADeletionMatchingAnyScopeWithoutCreateFlags) {
  Decoded d = decode(host_route_request(RouteChange::remove, ip("10.0.0.10"), 100, 7));
  EXPECT_EQ(d.header.nlmsg_type, RTM_DELROUTE);
  EXPECT_EQ(d.header.nlmsg_flags, NLM_F_REQUEST);
  EXPECT_EQ(d.route.rtm_scope, RT_SCOPE_NOWHERE);
  EXPECT_EQ(d.route.rtm_protocol, 70);  // only ferry's route to the VIP goes
  EXPECT_EQ(d.route.rtm_dst_len, 32);
  EXPECT_EQ(d.attributes[RTA_DST], (std::vector<std::uint8_t>{10, 0, 0, 10}));
  EXPECT_EQ(u32(d.attributes[RTA_TABLE]), 100u);
  EXPECT_EQ(u32(d.attributes[RTA_OIF]), 7u);
}

TEST(HostRouteRequest, Ipv6IsA128WithUniverseScope) {
  auto buf = host_route_request(RouteChange::add, ip("2001:db8::10"), 100, 1);
  EXPECT_EQ(buf.size(), 64u);  // RTA_DST carries 16 bytes
  Decoded d = decode(buf);
  EXPECT_EQ(d.route.rtm_family, AF_INET6);
  EXPECT_EQ(d.route.rtm_dst_len, 128);
  EXPECT_EQ(d.route.rtm_scope, RT_SCOPE_UNIVERSE);
  EXPECT_EQ(d.route.rtm_type, RTN_UNICAST);
  std::vector<std::uint8_t> dst(16, 0);
  dst[0] = 0x20, dst[1] = 0x01, dst[2] = 0x0d, dst[3] = 0xb8, dst[15] = 0x10;
  EXPECT_EQ(d.attributes[RTA_DST], dst);
  Decoded ensure = decode(host_route_request(RouteChange::ensure, ip("2001:db8::10"), 100, 1));
  EXPECT_EQ(ensure.route.rtm_scope, RT_SCOPE_UNIVERSE);
  Decoded remove = decode(host_route_request(RouteChange::remove, ip("2001:db8::10"), 100, 1));
  EXPECT_EQ(remove.header.nlmsg_type, RTM_DELROUTE);
  EXPECT_EQ(remove.route.rtm_scope, RT_SCOPE_NOWHERE);
}

TEST(HostRouteRequest, TablesAbove255AreOnlyInTheAttribute) {
  for (std::uint32_t table : {256u, 1000u, 4294967295u}) {
    Decoded d = decode(host_route_request(RouteChange::add, ip("10.0.0.10"), table, 1));
    EXPECT_EQ(d.route.rtm_table, RT_TABLE_UNSPEC) << table;
    EXPECT_EQ(u32(d.attributes[RTA_TABLE]), table);
  }
  Decoded d = decode(host_route_request(RouteChange::add, ip("10.0.0.10"), 255 - 3, 1));
  EXPECT_EQ(d.route.rtm_table, 252);
  EXPECT_EQ(u32(d.attributes[RTA_TABLE]), 252u);
}

TEST(HostRouteRequest, ReadsBackAsTheRouteItDescribes) {
  // The parser the fast path uses on the kernel's dumps sees a host route of protocol ferry.
  auto buf = host_route_request(RouteChange::add, ip("192.0.2.7"), 4000, 3);
  auto route = fastpath::parse_route(reinterpret_cast<const nlmsghdr*>(buf.data()));
  ASSERT_TRUE(route);
  EXPECT_FALSE(route->deleted);
  EXPECT_EQ(route->prefix.to_string(), "192.0.2.7/32");
  EXPECT_EQ(route->table, 4000u);
  EXPECT_EQ(route->protocol, 70);
  EXPECT_EQ(route->oif, 3);
  EXPECT_EQ(route->type, RTN_UNICAST);
  EXPECT_FALSE(route->gateway);
  auto del = host_route_request(RouteChange::remove, ip("2001:db8::7"), 100, 3);
  auto removed = fastpath::parse_route(reinterpret_cast<const nlmsghdr*>(del.data()));
  ASSERT_TRUE(removed);
  EXPECT_TRUE(removed->deleted);
  EXPECT_EQ(removed->prefix.to_string(), "2001:db8::7/128");
}

}  // namespace
}  // namespace ferry::announce
