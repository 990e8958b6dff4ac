// The fast path's lookup tables (kernel routes, neighbours) and its interface layout.
#include <gtest/gtest.h>

#include "lib/fastpath/kernel_routes.hh"
#include "lib/fastpath/neighbour_table.hh"
#include "lib/fastpath/port_layout.hh"
#include "tests/unit/fastpath/lab_tables.hh"

namespace ferry::fastpath {
namespace {

using namespace test;
using packet::IpVersion;

TEST(KernelRouteTable, LongestPrefixWinsThenLowestMetric) {
  KernelRouteTable t({
      {prefix("0.0.0.0/0"), 0, ip("10.1.0.1"), 0},
      {prefix("10.3.0.0/16"), 1, ip("10.2.0.254"), 200},
      {prefix("10.3.0.0/16"), 0, ip("10.1.0.254"), 100},
      {prefix("10.3.7.0/24"), 1, std::nullopt, 0},
  });
  EXPECT_EQ(t.lookup(addr("10.3.7.9"), IpVersion::v4)->prefix.to_string(), "10.3.7.0/24");
  const KernelRoute* r = t.lookup(addr("10.3.9.9"), IpVersion::v4);
  EXPECT_EQ(r->metric, 100u);
  EXPECT_EQ(r->port, 0u);
  EXPECT_EQ(t.lookup(addr("192.0.2.1"), IpVersion::v4)->prefix.length, 0);
  EXPECT_EQ(t.lookup(addr("2001:db8::1"), IpVersion::v6), nullptr) << "no IPv6 route";
}

TEST(KernelRouteTable, PortRestrictionOnlyConsidersThatPortsRoutes) {
  KernelRouteTable t({
      {prefix("10.3.0.0/16"), 0, ip("10.1.0.254"), 0},
      {prefix("10.0.0.0/8"), 1, ip("10.2.0.254"), 0},
  });
  EXPECT_EQ(t.lookup(addr("10.3.1.1"), IpVersion::v4, 1)->gateway, ip("10.2.0.254"));
  EXPECT_EQ(t.lookup(addr("10.3.1.1"), IpVersion::v4, 0)->gateway, ip("10.1.0.254"));
  EXPECT_EQ(t.lookup(addr("10.3.1.1"), IpVersion::v4, 5), nullptr);
}

TEST(KernelRouteTable, Ipv6PrefixesMatchOnBothWords) {
  KernelRouteTable t({
      {prefix("2001:db8::/32"), 0, std::nullopt, 0},
      {prefix("2001:db8:0:0:8000::/65"), 1, std::nullopt, 0},
  });
  EXPECT_EQ(t.lookup(addr("2001:db8::8000:0:0:1"), IpVersion::v6)->port, 1u);
  EXPECT_EQ(t.lookup(addr("2001:db8::1"), IpVersion::v6)->port, 0u);
  EXPECT_EQ(t.lookup(addr("10.0.0.1"), IpVersion::v4), nullptr);
}

TEST(NeighbourTable, FindsByPortVersionAndAddress) {
  std::vector<Neighbour> list = {
      {{0, IpVersion::v4, addr("10.1.0.5")}, kClientMac},
      {{1, IpVersion::v4, addr("10.1.0.5")}, kBackendMac},
      {{1, IpVersion::v6, addr("2001:db8::5")}, kRouterMac},
      {{0, IpVersion::v4, addr("10.1.0.5")}, kRouterMac},  // duplicate: the first one stays
  };
  NeighbourTable t(list);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(*t.find(0, IpVersion::v4, addr("10.1.0.5")), kClientMac);
  EXPECT_EQ(*t.find(1, IpVersion::v4, addr("10.1.0.5")), kBackendMac);
  EXPECT_EQ(*t.find(1, IpVersion::v6, addr("2001:db8::5")), kRouterMac);
  EXPECT_EQ(t.find(2, IpVersion::v4, addr("10.1.0.5")), nullptr);
  EXPECT_EQ(t.find(0, IpVersion::v4, addr("10.1.0.6")), nullptr);
  EXPECT_EQ(NeighbourTable().find(0, IpVersion::v4, addr("10.1.0.5")), nullptr);
}

TEST(NeighbourTable, ThousandsOfEntriesAreAllFound) {
  std::vector<Neighbour> list;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    NeighbourKey k{i % 4, IpVersion::v4, {}};
    k.address[0] = 10;
    k.address[2] = static_cast<std::uint8_t>(i >> 8);
    k.address[3] = static_cast<std::uint8_t>(i);
    list.push_back(
        {k, {0x02, 0, 0, 0, static_cast<std::uint8_t>(i >> 8), static_cast<std::uint8_t>(i)}});
  }
  NeighbourTable t(list);
  for (const Neighbour& n : list) {
    const packet::MacAddress* mac = t.find(n.key.port, n.key.version, n.key.address);
    ASSERT_NE(mac, nullptr);
    EXPECT_EQ(*mac, n.mac);
  }
}

InterfaceFacts fake_facts() {
  return {
      [](const std::string& name) { return name == "eth0"   ? 2
                                           : name == "eth1" ? 3
                                                            : 0; },
      [](const std::string&) { return std::optional<packet::MacAddress>(kPort0Mac); },
      [](const std::string& name) -> std::uint32_t { return name == "eth0" ? 4 : 2; },
  };
}

config::XdpConfig two_interfaces() {
  config::XdpConfig x;
  x.interfaces = {{"eth0", std::nullopt, config::XdpMode::automatic, config::Tristate::automatic},
                  {"eth1", std::vector<std::uint32_t>{1, 0}, config::XdpMode::automatic,
                   config::Tristate::automatic}};
  return x;
}

TEST(PortLayout, AllQueuesComeFromTheDeviceAndWorkersAreTheUnion) {
  FastpathLayout l = resolve_layout(two_interfaces(), fake_facts());
  ASSERT_EQ(l.ports.size(), 2u);
  EXPECT_EQ(l.ports[0].queues, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(l.ports[1].queues, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(l.queues, (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(l.ports[1].slot, 1u);
  EXPECT_EQ(l.ports[1].ifindex, 3);
  EXPECT_EQ(l.slot_of("eth1"), 1u);
  EXPECT_EQ(l.slot_of("eth9"), std::nullopt);
  EXPECT_EQ(l.port_by_ifindex(2)->ifname, "eth0");
  EXPECT_TRUE(l.ports[0].has_queue(3));
  EXPECT_FALSE(l.ports[1].has_queue(3));
}

TEST(PortLayout, MissingInterfaceAndQueueBeyondTheDeviceAreRefusedByName) {
  config::XdpConfig x = two_interfaces();
  x.interfaces[1].queues = std::vector<std::uint32_t>{5};
  try {
    resolve_layout(x, fake_facts());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("eth1: queue 5"), std::string::npos) << e.what();
  }
  x.interfaces[1].name = "eth7";
  try {
    resolve_layout(x, fake_facts());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("eth7: no such interface"), std::string::npos);
  }
}

TEST(PortLayout, OnlySocketRelevantChangesNeedARebind) {
  config::XdpConfig a = two_interfaces();
  config::XdpConfig b = a;
  b.interfaces[0].mode = config::XdpMode::generic;
  b.drop = {prefix("192.0.2.0/24")};
  EXPECT_TRUE(same_socket_layout(a, b)) << "attach mode and drop list do not touch sockets";
  b.rings.tx = 1024;
  EXPECT_FALSE(same_socket_layout(a, b));
  b = a;
  b.interfaces[1].queues = std::nullopt;
  EXPECT_FALSE(same_socket_layout(a, b));
  b = a;
  b.interfaces.pop_back();
  EXPECT_FALSE(same_socket_layout(a, b));
}

}  // namespace
}  // namespace ferry::fastpath
