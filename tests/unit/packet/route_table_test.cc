// RouteTable: longest prefix wins, per protocol and address family.
#include "lib/packet/route_table.hh"

#include <gtest/gtest.h>

#include <stdexcept>

#include "tests/unit/packet/frame_builder.hh"

namespace ferry::packet {
namespace {

config::RouteConfig route_config(std::string prefix, std::string via, bool udp = true,
                                 bool tcp = false) {
  return {*net::Prefix::parse(prefix), std::move(via), {.udp = udp, .tcp = tcp}};
}

std::optional<std::uint32_t> port_of(std::string_view name) {
  if (name == "eth0") return 0;
  if (name == "eth1") return 1;
  if (name == "eth2") return 2;
  return std::nullopt;
}

ParsedPacket to(const std::string& dst, std::uint8_t protocol = IPPROTO_UDP) {
  ParsedPacket p;
  p.version = net::IpAddress::parse(dst)->is_v4() ? IpVersion::v4 : IpVersion::v6;
  p.dst_address = test::addr(dst);
  p.protocol = protocol;
  return p;
}

TEST(RouteTable, LongestPrefixWins) {
  std::vector<config::RouteConfig> routes = {
      route_config("10.0.0.0/8", "eth0"),      route_config("10.0.2.0/24", "eth1"),
      route_config("10.0.2.128/25", "eth2"),   route_config("2001:db8::/32", "eth0"),
      route_config("2001:db8:1::/48", "eth2"), route_config("0.0.0.0/0", "eth1", false, true)};
  RouteTable t = RouteTable::build(routes, port_of);
  auto port = [&](const ParsedPacket& p) -> int {
    const RouteEntry* e = t.lookup(p);
    return e ? static_cast<int>(e->egress_port) : -1;
  };
  EXPECT_EQ(port(to("10.1.2.3")), 0);
  EXPECT_EQ(port(to("10.0.2.3")), 1);
  EXPECT_EQ(port(to("10.0.2.200")), 2);
  EXPECT_EQ(port(to("10.0.2.127")), 1);
  EXPECT_EQ(port(to("11.0.0.1")), -1);                // udp has no default route
  EXPECT_EQ(port(to("11.0.0.1", IPPROTO_TCP)), 1);    // tcp does
  EXPECT_EQ(port(to("10.0.2.200", IPPROTO_TCP)), 1);  // the /25 is udp only
  EXPECT_EQ(port(to("2001:db8:1::5")), 2);
  EXPECT_EQ(port(to("2001:db8:2::5")), 0);
  EXPECT_EQ(port(to("2001:db9::1")), -1);
  // 10.x as the first bytes of an IPv6 address is not 10.0.0.0/8.
  EXPECT_EQ(port(to("a00:1::")), -1);
  EXPECT_EQ(t.entries().front().prefix.length, 48);  // most specific first
}

TEST(RouteTable, UnknownInterfaceIsRefused) {
  std::vector<config::RouteConfig> routes = {route_config("10.0.0.0/8", "wlan9")};
  EXPECT_THROW(RouteTable::build(routes, port_of), std::invalid_argument);
  EXPECT_EQ(RouteTable{}.lookup(to("10.0.0.1")), nullptr);
}

}  // namespace
}  // namespace ferry::packet
