// ServiceTable built from configured services: which services it takes, lookups both ways, health,
// and the configurations it must refuse; and the flat EndpointMap underneath.
#include "lib/packet/service_table.hh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "lib/packet/balance.hh"
#include "tests/unit/packet/frame_builder.hh"

namespace ferry::packet {
namespace {

using test::addr;

ServiceTableOptions maglev_size(std::uint32_t size) {
  ServiceTableOptions o;
  o.maglev_size = size;
  return o;
}

config::ServiceConfig service(std::string name, std::string vip, std::uint16_t port,
                              std::vector<std::string> backends) {
  config::ServiceConfig s;
  s.name = std::move(name);
  s.vip = *net::IpAddress::parse(vip);
  s.port = port;
  for (const auto& b : backends) s.backends.push_back(*net::Endpoint::parse(b));
  return s;
}

ParsedPacket udp(const std::string& src, std::uint16_t sport, const std::string& dst,
                 std::uint16_t dport) {
  ParsedPacket p;
  p.version = net::IpAddress::parse(src)->is_v4() ? IpVersion::v4 : IpVersion::v6;
  p.protocol = IPPROTO_UDP;
  p.src_address = addr(src);
  p.dst_address = addr(dst);
  p.src_port = sport;
  p.dst_port = dport;
  return p;
}

std::vector<config::ServiceConfig> sample_services() {
  std::vector<config::ServiceConfig> v;
  v.push_back(service("dns", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53", "10.0.1.4:5353"}));
  auto tcp_only = service("web", "10.0.0.10", 80, {"10.0.1.2:80"});
  tcp_only.protocols = {.udp = false, .tcp = true};
  v.push_back(tcp_only);
  auto echo = service("echo", "127.0.0.1", 7007, {});
  echo.protocols = {.udp = false, .tcp = true};
  echo.mode = config::ServiceMode::echo;
  v.push_back(echo);
  auto reflect = service("mirror", "10.0.0.11", 9, {});
  reflect.mode = config::ServiceMode::reflect;
  v.push_back(reflect);
  v.push_back(service("dns6", "2001:db8::10", 53, {"[2001:db8:1::2]:53", "[2001:db8:1::3]:53"}));
  return v;
}

TEST(ServiceTable, TakesUdpProxyAndReflectServicesOnly) {
  auto configs = sample_services();
  ServiceTable t = build_service_table(configs, maglev_size(251));
  ASSERT_EQ(t.services().size(), 3u);
  EXPECT_EQ(t.services()[0].name, "dns");
  EXPECT_EQ(t.services()[0].action, ServiceAction::balance);
  EXPECT_EQ(t.services()[0].id, 0u);
  EXPECT_EQ(t.services()[1].name, "mirror");
  EXPECT_EQ(t.services()[1].action, ServiceAction::reflect);
  EXPECT_TRUE(t.services()[1].maglev.empty());
  EXPECT_EQ(t.services()[2].name, "dns6");
  EXPECT_EQ(t.services()[2].id, 2u);
  EXPECT_EQ(t.services()[0].maglev.slots().size(), 251u);
}

TEST(ServiceTable, MatchesRequestsByVipAndRepliesByBackend) {
  auto configs = sample_services();
  ServiceTable t = build_service_table(configs, maglev_size(251));

  ServiceMatch m = t.match(udp("192.0.2.1", 40000, "10.0.0.10", 53));
  ASSERT_EQ(m.kind, MatchKind::to_service);
  EXPECT_EQ(m.service->name, "dns");

  m = t.match(udp("10.0.1.4", 5353, "192.0.2.1", 40000));
  ASSERT_EQ(m.kind, MatchKind::from_backend);
  EXPECT_EQ(m.service->name, "dns");
  EXPECT_EQ(m.backend, 2u);

  m = t.match(udp("2001:db8:1::3", 53, "2001:db8::99", 1000));
  ASSERT_EQ(m.kind, MatchKind::from_backend);
  EXPECT_EQ(m.service->name, "dns6");
  EXPECT_EQ(m.backend, 1u);

  EXPECT_EQ(t.match(udp("192.0.2.1", 40000, "10.0.0.10", 54)).kind, MatchKind::none);
  EXPECT_EQ(t.match(udp("10.0.1.4", 53, "192.0.2.1", 40000)).kind, MatchKind::none);  // wrong port
  auto tcp = udp("192.0.2.1", 40000, "10.0.0.10", 80);
  tcp.protocol = IPPROTO_TCP;
  EXPECT_EQ(t.match(tcp).kind, MatchKind::none);  // the TCP service is the proxy's
  tcp.dst_port = 53;
  EXPECT_EQ(t.match(tcp).kind, MatchKind::none);
  // 10.0.0.10 as an IPv6 address with the same leading bytes is another key.
  auto v6 = udp("a00:a::", 40000, "a00:a::", 53);
  EXPECT_EQ(t.match(v6).kind, MatchKind::none);
  // A request wins over the reply reading when both apply.
  m = t.match(udp("10.0.1.2", 53, "10.0.0.10", 53));
  EXPECT_EQ(m.kind, MatchKind::to_service);
}

// The XDP maps' ids as they are after a few reloads: not the table's order, with gaps.
ServiceTableOptions steering_ids() {
  ServiceTableOptions o = maglev_size(251);
  o.steering_id = [](const config::ServiceConfig& s) -> std::optional<std::uint32_t> {
    if (s.name == "dns") return 7;
    if (s.name == "mirror") return 0;
    if (s.name == "dns6") return 2;
    return std::nullopt;
  };
  return o;
}

TEST(ServiceTable, AHintThatHoldsIsTakenWithoutALookup) {
  auto configs = sample_services();
  ServiceTable t = build_service_table(configs, steering_ids());
  auto request = udp("192.0.2.1", 40000, "10.0.0.10", 53);
  ServiceMatch m = t.match(request, {MatchKind::to_service, 7, 0});
  ASSERT_EQ(m.kind, MatchKind::to_service);
  EXPECT_EQ(m.service->name, "dns");
  m = t.match(udp("2001:db8:1::3", 53, "2001:db8::99", 1000), {MatchKind::from_backend, 2, 1});
  ASSERT_EQ(m.kind, MatchKind::from_backend);
  EXPECT_EQ(m.service->name, "dns6");
  EXPECT_EQ(m.backend, 1u);
  // The one frame both readings fit (to a VIP, from a backend): the XDP program decides, as it
  // decides which counter the frame goes to; its own order is the table's (VIP first).
  auto both = udp("10.0.1.2", 53, "10.0.0.10", 53);
  EXPECT_EQ(t.match(both, {MatchKind::from_backend, 7, 0}).kind, MatchKind::from_backend);
  EXPECT_EQ(t.match(both, {MatchKind::to_service, 7, 0}).kind, MatchKind::to_service);
}

TEST(ServiceTable, AHintThatDoesNotHoldFallsBackToTheTablesOwnMatch) {
  auto configs = sample_services();
  ServiceTable t = build_service_table(configs, steering_ids());
  auto request = udp("192.0.2.1", 40000, "10.0.0.10", 53);
  auto reply = udp("10.0.1.4", 5353, "192.0.2.1", 40000);
  // Another service's id (the maps of a config this table is not built from), an unknown id, an
  // id past every one, the right id with another backend's index or one past the end, a TCP frame.
  for (MatchHint wrong :
       {MatchHint{MatchKind::to_service, 2, 0}, MatchHint{MatchKind::to_service, 5, 0},
        MatchHint{MatchKind::to_service, 60000, 0}, MatchHint{MatchKind::from_backend, 7, 0}}) {
    ServiceMatch m = t.match(request, wrong);
    ASSERT_EQ(m.kind, MatchKind::to_service);
    EXPECT_EQ(m.service->name, "dns");
  }
  for (MatchHint wrong :
       {MatchHint{MatchKind::from_backend, 7, 1}, MatchHint{MatchKind::from_backend, 7, 3},
        MatchHint{MatchKind::from_backend, 0, 0}, MatchHint{MatchKind::to_service, 7, 2}}) {
    ServiceMatch m = t.match(reply, wrong);
    ASSERT_EQ(m.kind, MatchKind::from_backend);
    EXPECT_EQ(m.backend, 2u);
  }
  auto tcp = request;
  tcp.protocol = IPPROTO_TCP;
  EXPECT_EQ(t.match(tcp, {MatchKind::to_service, 7, 0}).kind, MatchKind::none);
  // The IPv6 address with the IPv4 VIP's leading bytes is not that VIP.
  auto v6 = udp("2001:db8::1", 40000, "a00:a::", 53);
  v6.dst_address = addr("10.0.0.10");
  v6.version = IpVersion::v6;
  EXPECT_EQ(t.match(v6, {MatchKind::to_service, 7, 0}).kind, MatchKind::none);
  // A table built without steering ids takes no hint.
  ServiceTable plain = build_service_table(configs, maglev_size(251));
  EXPECT_EQ(plain.match(udp("10.0.1.2", 53, "10.0.0.10", 53), {MatchKind::from_backend, 7, 0}).kind,
            MatchKind::to_service);
}

TEST(ServiceTable, DownBackendsLeaveMaglevButKeepTheirReplies) {
  auto configs = sample_services();
  ServiceTableOptions options;
  options.maglev_size = 251;
  options.backend_up = [](const config::ServiceConfig& s, const net::Endpoint& b) {
    return !(s.name == "dns" && b.to_string() == "10.0.1.3:53");
  };
  ServiceTable t = build_service_table(configs, options);
  const Service& dns = t.services()[0];
  EXPECT_EQ(dns.backend_up, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(dns.maglev.backend_count(), 2u);
  std::set<std::uint16_t> used(dns.maglev.slots().begin(), dns.maglev.slots().end());
  EXPECT_EQ(used, (std::set<std::uint16_t>{0, 2}));
  EXPECT_EQ(t.match(udp("10.0.1.3", 53, "192.0.2.1", 40000)).kind, MatchKind::from_backend);

  options.backend_up = [](const config::ServiceConfig&, const net::Endpoint&) { return false; };
  ServiceTable none_up = build_service_table(configs, options);
  EXPECT_TRUE(none_up.services()[0].maglev.empty());
}

TEST(ServiceTable, WeightsReachMaglevAndWeightZeroKeepsItsReplies) {
  auto dns = service("dns", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53", "10.0.1.4:53"});
  dns.backend_weights = {1, 0, 3};
  ServiceTable t = build_service_table(std::vector<config::ServiceConfig>{dns}, maglev_size(251));
  const Service& s = t.services()[0];
  EXPECT_EQ(s.backend_weight, (std::vector<std::uint32_t>{1, 0, 3}));
  EXPECT_EQ(s.backend_up, (std::vector<bool>{true, true, true}));
  EXPECT_EQ(s.maglev.backend_count(), 2u);
  std::map<std::uint16_t, int> slots;
  for (std::uint16_t b : s.maglev.slots()) ++slots[b];
  EXPECT_EQ(slots.count(1), 0u);
  EXPECT_NEAR(slots[2], 3 * slots[0], 4);
  // Drained by configuration, not gone: a reply from it is still turned back into the VIP's.
  ServiceMatch m = t.match(udp("10.0.1.3", 53, "192.0.2.1", 40000));
  EXPECT_EQ(m.kind, MatchKind::from_backend);
  EXPECT_EQ(m.backend, 1u);
}

TEST(ServiceTable, AServiceWhoseBackendsDidNotChangeKeepsItsMaglevTable) {
  std::vector<config::ServiceConfig> configs{
      service("a", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53"}),
      service("b", "10.0.0.11", 53, {"10.0.2.2:53", "10.0.2.3:53"}),
      service("c", "10.0.0.12", 53, {"10.0.3.2:53", "10.0.3.3:53"})};
  const ServiceTable before = build_service_table(configs, maglev_size(251));
  // One backend more for a, one down in c, nothing for b.
  configs[0].backends.push_back(*net::Endpoint::parse("10.0.1.4:53"));
  ServiceTableOptions options = maglev_size(251);
  options.previous = &before;
  options.backend_up = [](const config::ServiceConfig&, const net::Endpoint& b) {
    return b.to_string() != "10.0.3.3:53";
  };
  const ServiceTable after = build_service_table(configs, options);
  EXPECT_FALSE(after.services()[0].maglev.shares_slots_with(before.services()[0].maglev));
  EXPECT_TRUE(after.services()[1].maglev.shares_slots_with(before.services()[1].maglev));
  EXPECT_FALSE(after.services()[2].maglev.shares_slots_with(before.services()[2].maglev));
  EXPECT_EQ(after.services()[2].maglev.backend_count(), 1u);
  // Matched by name: a service renamed is built afresh, and the tables equal fresh ones.
  configs[1].name = "b2";
  options.previous = &after;
  const ServiceTable renamed = build_service_table(configs, options);
  EXPECT_FALSE(renamed.services()[1].maglev.shares_slots_with(after.services()[1].maglev));
  options.previous = nullptr;
  const ServiceTable fresh = build_service_table(configs, options);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto x = renamed.services()[i].maglev.slots();
    const auto y = fresh.services()[i].maglev.slots();
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin(), y.end())) << i;
  }
}

TEST(ServiceTable, ACheckOnlyBuildThrowsTheSameErrorsButFillsNoTable) {
  std::vector<config::ServiceConfig> configs{
      service("a", "10.0.0.10", 53, {"10.0.1.2:53", "10.0.1.3:53"})};
  ServiceTableOptions options = maglev_size(251);
  options.check_only = true;
  const ServiceTable checked = build_service_table(configs, options);
  ASSERT_EQ(checked.services().size(), 1u);
  EXPECT_TRUE(checked.services()[0].maglev.empty());
  options.maglev_size = 250;
  EXPECT_THROW(build_service_table(configs, options), std::invalid_argument);
  options.maglev_size = 251;
  configs[0].backends.push_back(*net::Endpoint::parse("10.0.1.2:53"));
  EXPECT_THROW(build_service_table(configs, options), std::invalid_argument)
      << "a backend listed twice";
}

TEST(ServiceTable, AServiceWithoutWeightsWeighsOneEach) {
  ServiceTable t = build_service_table(sample_services(), maglev_size(251));
  EXPECT_EQ(t.services()[0].backend_weight, (std::vector<std::uint32_t>{1, 1, 1}));
}

TEST(ServiceTable, UdpFlowsSplitByWeight) {
  // 60,000 random client flows through match() and the Maglev choice, as a worker takes them:
  // weights 1:2:3 land within 2 percentage points of 1/6, 2/6, 3/6.
  auto web = service("quic", "10.0.0.10", 443, {"10.0.1.2:443", "10.0.1.3:443", "10.0.1.4:443"});
  web.backend_weights = {1, 2, 3};
  ServiceTable t = build_service_table(std::vector<config::ServiceConfig>{web});
  std::mt19937_64 rng(13);
  std::vector<int> count(3, 0);
  constexpr int kFlows = 60'000;
  for (int i = 0; i < kFlows; ++i) {
    const std::uint64_t r = rng();
    ParsedPacket p = udp("192.0.2.1", static_cast<std::uint16_t>(r), "10.0.0.10", 443);
    p.src_address[0] = static_cast<std::uint8_t>(r >> 16);
    p.src_address[1] = static_cast<std::uint8_t>(r >> 24);
    p.src_address[2] = static_cast<std::uint8_t>(r >> 32);
    ServiceMatch m = t.match(p);
    ASSERT_EQ(m.kind, MatchKind::to_service);
    ++count[choose_backend(*m.service, p, t.flow_hash_seed())];
  }
  for (int b = 0; b < 3; ++b) {
    EXPECT_NEAR(static_cast<double>(count[b]) / kFlows, (b + 1) / 6.0, 0.02) << "backend " << b;
  }
  std::printf("udp weights 1:2:3 over %d flows: %.2f%% %.2f%% %.2f%%\n", kFlows,
              100.0 * count[0] / kFlows, 100.0 * count[1] / kFlows, 100.0 * count[2] / kFlows);
}

TEST(ServiceTable, RefusesABackendSharedByTwoServices) {
  std::vector<config::ServiceConfig> v;
  v.push_back(service("a", "10.0.0.10", 53, {"10.0.1.2:53"}));
  v.push_back(service("b", "10.0.0.11", 53, {"10.0.1.3:53", "10.0.1.2:53"}));
  try {
    build_service_table(v, maglev_size(251));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with(
        "service b: backend 10.0.1.2:53 (udp) already serves service a; replies from it"))
        << e.what();
  }
  // The same address on another port is another backend.
  v[1].backends[1].port = 54;
  EXPECT_NO_THROW(build_service_table(v, maglev_size(251)));
}

TEST(ServiceTable, RefusesMixedFamiliesAndBadSizes) {
  std::vector<config::ServiceConfig> v;
  v.push_back(service("a", "10.0.0.10", 53, {"[2001:db8::1]:53"}));
  EXPECT_THROW(build_service_table(v, maglev_size(251)), std::invalid_argument);
  v[0] = service("a", "10.0.0.10", 53, {"10.0.1.1:53"});
  EXPECT_THROW(build_service_table(v, maglev_size(250)), std::invalid_argument);
  v.push_back(v[0]);
  v[1].backends[0].port = 99;
  EXPECT_THROW(build_service_table(v, maglev_size(251)), std::invalid_argument);  // same vip
}

TEST(ServiceTable, EmptyConfigMatchesNothing) {
  ServiceTable t = build_service_table({});
  EXPECT_TRUE(t.services().empty());
  EXPECT_EQ(t.match(udp("192.0.2.1", 1, "10.0.0.10", 53)).kind, MatchKind::none);
}

TEST(EndpointMap, FindsEveryInsertedKeyAndNothingElse) {
  EndpointMap map;
  std::mt19937_64 rng(5);
  std::vector<EndpointKey> keys;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    EndpointKey k;
    std::uint64_t r = rng();
    k.address = {10, static_cast<std::uint8_t>(r), static_cast<std::uint8_t>(r >> 8),
                 static_cast<std::uint8_t>(r >> 16)};
    k.port = static_cast<std::uint16_t>(r >> 24);
    k.protocol = IPPROTO_UDP;
    if (map.insert(k, {i, i * 2})) keys.push_back(k);
  }
  EXPECT_EQ(map.size(), keys.size());
  EXPECT_GT(keys.size(), 4990u);
  for (const EndpointKey& k : keys) {
    const EndpointTarget* t = map.find(k);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->backend, t->service * 2);
    EXPECT_FALSE(map.insert(k, {0, 0}));
  }
  EndpointKey absent = keys[0];
  absent.protocol = IPPROTO_TCP;
  EXPECT_EQ(map.find(absent), nullptr);
  absent = keys[0];
  absent.version = IpVersion::v6;
  EXPECT_EQ(map.find(absent), nullptr);
  EXPECT_EQ(EndpointMap{}.find(keys[0]), nullptr);
}

}  // namespace
}  // namespace ferry::packet
