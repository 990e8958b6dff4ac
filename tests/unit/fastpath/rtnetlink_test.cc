// rtnetlink parsing against hand-built messages, the neighbour requests' bytes, and real dumps and
// queries.
#include "lib/fastpath/rtnetlink.hh"

#include <gtest/gtest.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>
#include <net/if.h>

#include <algorithm>
#include <cstring>

namespace ferry::fastpath {
namespace {

// Builds one netlink message: header, fixed struct, then attributes.
class MessageBuilder {
 public:
  template <typename Fixed>
  MessageBuilder(std::uint16_t type, const Fixed& fixed) {
    buf_.resize(NLMSG_LENGTH(sizeof(Fixed)));
    header()->nlmsg_type = type;
    std::memcpy(NLMSG_DATA(header()), &fixed, sizeof(Fixed));
    align();
  }
  MessageBuilder& attr(std::uint16_t type, const void* data, std::size_t len) {
    append_attribute(buf_, type, data, len);
    return *this;
  }
  MessageBuilder& u32(std::uint16_t type, std::uint32_t v) { return attr(type, &v, sizeof v); }
  MessageBuilder& address(std::uint16_t type, const std::string& text) {
    auto a = *net::IpAddress::parse(text);
    return attr(type, a.bytes.data(), a.is_v4() ? 4 : 16);
  }
  const nlmsghdr* get() {
    header()->nlmsg_len = static_cast<std::uint32_t>(buf_.size());
    return header();
  }
  std::vector<std::uint8_t>& bytes() { return buf_; }

 private:
  nlmsghdr* header() { return reinterpret_cast<nlmsghdr*>(buf_.data()); }
  void align() { buf_.resize(NLMSG_ALIGN(buf_.size()), 0); }
  std::vector<std::uint8_t> buf_;
};

rtmsg route_header(std::uint8_t family, std::uint8_t dst_len) {
  rtmsg r{};
  r.rtm_family = family;
  r.rtm_dst_len = dst_len;
  r.rtm_table = RT_TABLE_MAIN;
  r.rtm_type = RTN_UNICAST;
  return r;
}

TEST(Rtnetlink, ParsesANeighbourWithItsMacAndState) {
  ndmsg nd{};
  nd.ndm_family = AF_INET;
  nd.ndm_ifindex = 7;
  nd.ndm_state = NUD_REACHABLE;
  std::uint8_t mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  MessageBuilder m(RTM_NEWNEIGH, nd);
  m.address(NDA_DST, "10.1.2.3").attr(NDA_LLADDR, mac, 6);
  auto n = parse_neighbour(m.get());
  ASSERT_TRUE(n.has_value());
  EXPECT_FALSE(n->deleted);
  EXPECT_EQ(n->ifindex, 7);
  EXPECT_EQ(n->address, *net::IpAddress::parse("10.1.2.3"));
  ASSERT_TRUE(n->mac.has_value());
  EXPECT_EQ((*n->mac)[5], 0x55);
  EXPECT_TRUE(has_usable_mac(n->state));
}

TEST(Rtnetlink, IncompleteAndFailedNeighboursHaveNoUsableMac) {
  EXPECT_FALSE(has_usable_mac(NUD_INCOMPLETE));
  EXPECT_FALSE(has_usable_mac(NUD_FAILED));
  EXPECT_FALSE(has_usable_mac(NUD_NONE));
  EXPECT_TRUE(has_usable_mac(NUD_STALE));
  EXPECT_TRUE(has_usable_mac(NUD_PERMANENT));
  ndmsg nd{};
  nd.ndm_family = AF_INET6;
  nd.ndm_ifindex = 3;
  nd.ndm_state = NUD_FAILED;
  MessageBuilder m(RTM_DELNEIGH, nd);
  m.address(NDA_DST, "2001:db8::9");
  auto n = parse_neighbour(m.get());
  ASSERT_TRUE(n.has_value());
  EXPECT_TRUE(n->deleted);
  EXPECT_FALSE(n->mac.has_value());
  EXPECT_EQ(n->address.to_string(), "2001:db8::9");
}

TEST(Rtnetlink, NeighbourWithoutDestinationOrOfAnotherFamilyIsIgnored) {
  ndmsg nd{};
  nd.ndm_family = AF_INET;
  MessageBuilder no_dst(RTM_NEWNEIGH, nd);
  EXPECT_FALSE(parse_neighbour(no_dst.get()).has_value());
  nd.ndm_family = AF_BRIDGE;
  MessageBuilder bridge(RTM_NEWNEIGH, nd);
  bridge.address(NDA_DST, "10.0.0.1");
  EXPECT_FALSE(parse_neighbour(bridge.get()).has_value());
}

TEST(Rtnetlink, ParsesAGatewayRouteWithMetricAndTable) {
  MessageBuilder m(RTM_NEWROUTE, route_header(AF_INET, 16));
  m.address(RTA_DST, "10.3.0.0")
      .u32(RTA_OIF, 4)
      .address(RTA_GATEWAY, "10.2.0.254")
      .u32(RTA_PRIORITY, 100)
      .u32(RTA_TABLE, RT_TABLE_MAIN);
  auto r = parse_route(m.get());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->prefix.to_string(), "10.3.0.0/16");
  EXPECT_EQ(r->oif, 4);
  ASSERT_TRUE(r->gateway.has_value());
  EXPECT_EQ(r->gateway->to_string(), "10.2.0.254");
  EXPECT_EQ(r->metric, 100u);
  EXPECT_TRUE(is_forwarding_route(*r));
}

TEST(Rtnetlink, DefaultRouteHasNoDestinationAttribute) {
  MessageBuilder m(RTM_NEWROUTE, route_header(AF_INET6, 0));
  m.u32(RTA_OIF, 2).address(RTA_GATEWAY, "fe80::1");
  auto r = parse_route(m.get());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->prefix.to_string(), "::/0");
  EXPECT_EQ(r->gateway->to_string(), "fe80::1");
}

TEST(Rtnetlink, MultipathRouteTakesItsFirstNextHop) {
  std::vector<std::uint8_t> nexthops(RTNH_SPACE(RTA_SPACE(4)) * 2, 0);
  for (int i = 0; i < 2; ++i) {
    auto* nh = reinterpret_cast<rtnexthop*>(nexthops.data() + i * RTNH_SPACE(RTA_SPACE(4)));
    nh->rtnh_len = static_cast<unsigned short>(RTNH_LENGTH(RTA_SPACE(4)));
    nh->rtnh_ifindex = 10 + i;
    auto* gw = static_cast<rtattr*>(RTNH_DATA(nh));
    gw->rta_type = RTA_GATEWAY;
    gw->rta_len = RTA_LENGTH(4);
    std::uint8_t a[4] = {10, 9, 0, static_cast<std::uint8_t>(1 + i)};
    std::memcpy(RTA_DATA(gw), a, 4);
  }
  MessageBuilder m(RTM_NEWROUTE, route_header(AF_INET, 24));
  m.address(RTA_DST, "10.8.0.0").attr(RTA_MULTIPATH, nexthops.data(), nexthops.size());
  auto r = parse_route(m.get());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->oif, 10);
  EXPECT_EQ(r->gateway->to_string(), "10.9.0.1");
}

TEST(Rtnetlink, LocalCachedAndOtherTablesRoutesAreNotForwardingRoutes) {
  RouteMessage r;
  r.table = RT_TABLE_MAIN;
  r.type = RTN_UNICAST;
  r.oif = 1;
  EXPECT_TRUE(is_forwarding_route(r));
  RouteMessage local = r;
  local.type = RTN_LOCAL;
  EXPECT_FALSE(is_forwarding_route(local));
  RouteMessage other = r;
  other.table = 100;
  EXPECT_FALSE(is_forwarding_route(other));
  RouteMessage cached = r;
  cached.flags = RTM_F_CLONED;
  EXPECT_FALSE(is_forwarding_route(cached));
  RouteMessage blackhole = r;
  blackhole.oif = 0;
  EXPECT_FALSE(is_forwarding_route(blackhole));
}

TEST(Rtnetlink, ResolveRequestIsNewNeighWithNtfUseCreateReplace) {
  auto bytes = resolve_request(9, *net::IpAddress::parse("10.2.0.7"), 42);
  const auto* h = reinterpret_cast<const nlmsghdr*>(bytes.data());
  EXPECT_EQ(h->nlmsg_len, bytes.size());
  EXPECT_EQ(h->nlmsg_type, RTM_NEWNEIGH);
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE);
  EXPECT_EQ(h->nlmsg_seq, 42u);
  const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
  EXPECT_EQ(nd->ndm_family, AF_INET);
  EXPECT_EQ(nd->ndm_ifindex, 9);
  EXPECT_EQ(nd->ndm_flags, NTF_USE);
  EXPECT_EQ(nd->ndm_state, NUD_NONE);
  // It parses back as a neighbour message for that address (without a MAC).
  std::vector<std::uint8_t> copy = bytes;
  reinterpret_cast<nlmsghdr*>(copy.data())->nlmsg_type = RTM_NEWNEIGH;
  auto n = parse_neighbour(reinterpret_cast<const nlmsghdr*>(copy.data()));
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->address.to_string(), "10.2.0.7");
}

// The messages of a request buffer, in order.
std::vector<const nlmsghdr*> messages_of(const std::vector<std::uint8_t>& bytes) {
  std::vector<const nlmsghdr*> out;
  for_each_message(bytes, [&](const nlmsghdr* h) { out.push_back(h); });
  return out;
}

TEST(Rtnetlink, RestartRequestSetsAnExistingEntryFailedThenUsesIt) {
  auto bytes = restart_request(9, *net::IpAddress::parse("fd00:1::21"), 7);
  auto m = messages_of(bytes);
  ASSERT_EQ(m.size(), 2u);
  std::size_t total = 0;
  for (const nlmsghdr* h : m) total += NLMSG_ALIGN(h->nlmsg_len);
  EXPECT_EQ(total, bytes.size());
  const auto* failed = static_cast<const ndmsg*>(NLMSG_DATA(m[0]));
  EXPECT_EQ(m[0]->nlmsg_type, RTM_NEWNEIGH);
  EXPECT_EQ(m[0]->nlmsg_flags, NLM_F_REQUEST | NLM_F_REPLACE)
      << "no NLM_F_CREATE: an entry that went away meanwhile is not made up as FAILED";
  EXPECT_EQ(failed->ndm_state, NUD_FAILED);
  EXPECT_EQ(failed->ndm_flags, 0);
  const auto* use = static_cast<const ndmsg*>(NLMSG_DATA(m[1]));
  EXPECT_EQ(m[1]->nlmsg_flags, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE);
  EXPECT_EQ(use->ndm_flags, NTF_USE);
  EXPECT_EQ(use->ndm_state, NUD_NONE);
  for (const nlmsghdr* h : m) {
    const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(h));
    EXPECT_EQ(h->nlmsg_seq, 7u);
    EXPECT_EQ(nd->ndm_family, AF_INET6);
    EXPECT_EQ(nd->ndm_ifindex, 9);
    auto n = parse_neighbour(h);
    ASSERT_TRUE(n.has_value());
    EXPECT_EQ(n->address.to_string(), "fd00:1::21");
  }
}

TEST(Rtnetlink, NeighbourQueryIsAGetOfOneEntryAsTheKernelsStrictCheckWantsIt) {
  auto bytes = neighbour_query(4, *net::IpAddress::parse("10.2.0.7"), 3);
  auto m = messages_of(bytes);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]->nlmsg_type, RTM_GETNEIGH);
  EXPECT_EQ(m[0]->nlmsg_flags, NLM_F_REQUEST) << "one entry, not a dump";
  const auto* nd = static_cast<const ndmsg*>(NLMSG_DATA(m[0]));
  EXPECT_EQ(nd->ndm_ifindex, 4);
  // neigh_valid_get_req() refuses a state, a type or flags other than NTF_PROXY.
  EXPECT_EQ(nd->ndm_state, 0);
  EXPECT_EQ(nd->ndm_type, 0);
  EXPECT_EQ(nd->ndm_flags, 0);
  EXPECT_EQ(m[0]->nlmsg_len, NLMSG_ALIGN(NLMSG_LENGTH(sizeof(ndmsg))) + RTA_SPACE(4))
      << "NDA_DST of the address's length and nothing else";
}

TEST(Rtnetlink, QueryOfAnEntryTheKernelDoesNotHaveAnswersEnoent) {
  RtnetlinkSocket socket;
  int lo = static_cast<int>(::if_nametoindex("lo"));
  ASSERT_GT(lo, 0);
  auto request = neighbour_query(lo, *net::IpAddress::parse("192.0.2.77"), 0);
  int visited = 0;
  EXPECT_EQ(socket.transact(request, [&](const nlmsghdr*) { ++visited; }), ENOENT);
  EXPECT_EQ(visited, 0);
  EXPECT_EQ(socket.transact(request), ENOENT) << "the socket is ready for the next request";
}

TEST(Rtnetlink, NudStateNamesAreThoseOfIpNeigh) {
  EXPECT_STREQ(nud_state_name(NUD_REACHABLE), "REACHABLE");
  EXPECT_STREQ(nud_state_name(NUD_STALE), "STALE");
  EXPECT_STREQ(nud_state_name(NUD_INCOMPLETE), "INCOMPLETE");
  EXPECT_STREQ(nud_state_name(NUD_FAILED), "FAILED");
  EXPECT_STREQ(nud_state_name(NUD_PERMANENT), "PERMANENT");
  EXPECT_STREQ(nud_state_name(NUD_NONE), "NONE");
}

TEST(Rtnetlink, ForEachMessageWalksEveryMessageOfADatagram) {
  ndmsg nd{};
  nd.ndm_family = AF_INET;
  MessageBuilder a(RTM_NEWNEIGH, nd);
  a.address(NDA_DST, "10.0.0.1");
  MessageBuilder b(RTM_NEWNEIGH, nd);
  b.address(NDA_DST, "10.0.0.2");
  a.get();
  b.get();
  std::vector<std::uint8_t> datagram = a.bytes();
  datagram.insert(datagram.end(), b.bytes().begin(), b.bytes().end());
  std::vector<std::string> seen;
  for_each_message(datagram, [&](const nlmsghdr* h) {
    seen.push_back(parse_neighbour(h)->address.to_string());
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"10.0.0.1", "10.0.0.2"}));
}

TEST(Rtnetlink, DumpsThisHostsRoutesAndNeighboursWithoutPrivileges) {
  RtnetlinkSocket socket;
  int routes = 0, done = 0;
  socket.dump(RTM_GETROUTE, AF_INET, [&](const nlmsghdr* h) { routes += parse_route(h) ? 1 : 0; });
  socket.dump(RTM_GETNEIGH, AF_INET, [&](const nlmsghdr*) { ++done; });
  // The local table always has routes for 127.0.0.0/8.
  EXPECT_GT(routes, 0);
  EXPECT_GE(done, 0);
}

TEST(Rtnetlink, ParsesALinkWithItsNameIndexAndFlags) {
  ifinfomsg info{};
  info.ifi_family = AF_UNSPEC;
  info.ifi_index = 12;
  info.ifi_flags = IFF_UP | IFF_BROADCAST;
  MessageBuilder m(RTM_NEWLINK, info);
  std::uint32_t mtu = 1500;
  m.attr(IFLA_MTU, &mtu, sizeof mtu).attr(IFLA_IFNAME, "eth1", 5);
  auto link = parse_link(m.get());
  ASSERT_TRUE(link.has_value());
  EXPECT_FALSE(link->deleted);
  EXPECT_EQ(link->ifindex, 12);
  EXPECT_EQ(link->name, "eth1");
  EXPECT_EQ(link->flags & IFF_UP, static_cast<std::uint32_t>(IFF_UP));

  MessageBuilder gone(RTM_DELLINK, info);
  gone.attr(IFLA_IFNAME, "eth1", 5);
  auto deleted = parse_link(gone.get());
  ASSERT_TRUE(deleted.has_value());
  EXPECT_TRUE(deleted->deleted);
  EXPECT_EQ(deleted->ifindex, 12);
}

TEST(Rtnetlink, LinkNameWithoutTerminatorStopsAtItsPayload) {
  ifinfomsg info{};
  info.ifi_index = 3;
  MessageBuilder m(RTM_NEWLINK, info);
  m.attr(IFLA_IFNAME, "g1xx", 2);  // payload "g1", padding after it
  auto link = parse_link(m.get());
  ASSERT_TRUE(link.has_value());
  EXPECT_EQ(link->name, "g1");
}

TEST(Rtnetlink, LinkWithoutNameOrIndexAndOtherMessagesAreIgnored) {
  ifinfomsg info{};
  info.ifi_index = 4;
  MessageBuilder unnamed(RTM_NEWLINK, info);
  EXPECT_FALSE(parse_link(unnamed.get()).has_value());
  info.ifi_index = 0;
  MessageBuilder no_index(RTM_NEWLINK, info);
  no_index.attr(IFLA_IFNAME, "eth0", 5);
  EXPECT_FALSE(parse_link(no_index.get()).has_value());
  ndmsg nd{};
  nd.ndm_family = AF_INET;
  MessageBuilder neighbour(RTM_NEWNEIGH, nd);
  neighbour.address(NDA_DST, "10.0.0.1");
  EXPECT_FALSE(parse_link(neighbour.get()).has_value());
}

TEST(Rtnetlink, DumpsThisHostsLinksWithLoopbackAmongThem) {
  RtnetlinkSocket socket;
  std::vector<LinkMessage> links;
  socket.dump(RTM_GETLINK, AF_UNSPEC, [&](const nlmsghdr* h) {
    if (auto link = parse_link(h)) links.push_back(*link);
  });
  auto lo = std::find_if(links.begin(), links.end(), [](const auto& l) { return l.name == "lo"; });
  ASSERT_NE(lo, links.end());
  EXPECT_EQ(lo->ifindex, static_cast<int>(::if_nametoindex("lo")));
}

}  // namespace
}  // namespace ferry::fastpath
