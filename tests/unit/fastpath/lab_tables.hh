// A small gateway for the fast-path unit tests: port 0 faces clients (10.1.0.0/24), port 1 faces
// backends (10.2.0.0/24) with a gateway 10.2.0.254 for 10.3.0.0/16; one balanced UDP service, one
// reflect service, one configured route; the kernel's routes and neighbours as plain values, and
// the ports' MTUs and addresses for the IP-hop tests.
#pragma once

#include <netinet/in.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "lib/config/config.hh"
#include "lib/fastpath/snapshot.hh"
#include "lib/packet/route_table.hh"
#include "lib/packet/service_table.hh"
#include "tests/unit/packet/frame_builder.hh"

namespace ferry::fastpath::test {

using packet::test::addr;

inline const packet::MacAddress kPort0Mac = {0x02, 0xf0, 0, 0, 0, 0x10};
inline const packet::MacAddress kPort1Mac = {0x02, 0xf0, 0, 0, 0, 0x11};
inline const packet::MacAddress kClientMac = {0x02, 0xc0, 0, 0, 0, 0x01};
inline const packet::MacAddress kBackendMac = {0x02, 0xb0, 0, 0, 0, 0x02};
inline const packet::MacAddress kRouterMac = {0x02, 0xee, 0, 0, 0, 0xfe};

inline net::IpAddress ip(const std::string& text) {
  return *net::IpAddress::parse(text);
}
inline net::Prefix prefix(const std::string& text) {
  return *net::Prefix::parse(text);
}
inline net::Endpoint endpoint(const std::string& text) {
  return *net::Endpoint::parse(text);
}

inline config::Config lab_config(std::vector<std::string> backends = {"10.2.0.2:53", "10.2.0.3:53",
                                                                      "10.2.0.4:53"}) {
  config::Config c;
  c.xdp.interfaces = {
      {"port0", std::nullopt, config::XdpMode::automatic, config::Tristate::automatic},
      {"port1", std::nullopt, config::XdpMode::automatic, config::Tristate::automatic}};
  config::ServiceConfig dns;
  dns.name = "dns";
  dns.vip = ip("10.0.0.10");
  dns.port = 53;
  for (const auto& b : backends) dns.backends.push_back(endpoint(b));
  c.services.push_back(dns);
  config::ServiceConfig mirror;
  mirror.name = "mirror";
  mirror.vip = ip("10.0.0.20");
  mirror.port = 7;
  mirror.mode = config::ServiceMode::reflect;
  c.services.push_back(mirror);
  c.routes.push_back({prefix("10.3.0.0/16"), "port1", {.udp = true, .tcp = false}});
  return c;
}

// `slots`: where the backends' per-backend counter slots come from (held by the tables while they
// live, as the fast path's are); null: none, nothing is counted per backend.
inline std::shared_ptr<const ConfigTables> config_tables(const config::Config& c,
                                                         packet::ServiceTableOptions options = {},
                                                         BackendSlots* slots = nullptr) {
  auto port_of = [](std::string_view name) -> std::optional<std::uint32_t> {
    if (name == "port0") return 0;
    if (name == "port1") return 1;
    return std::nullopt;
  };
  BackendSlotLease lease = slots ? slots->lease() : BackendSlotLease();
  if (slots) take_counter_slots(options, lease);
  return std::make_shared<const ConfigTables>(
      ConfigTables{packet::build_service_table(c.services, options),
                   packet::RouteTable::build(c.routes, port_of), c.xdp.encap, std::move(lease)});
}

// The kernel: connected routes on both ports (2001:db8:1::/64 and 2001:db8:2::/64 too),
// 10.3.0.0/16 behind 10.2.0.254; the client and the backends (2001:db8:1::5, 2001:db8:2::2 and ::3)
// known as neighbours unless `with_neighbours` is false.
inline std::shared_ptr<const NextHopTables> next_hop_tables(bool with_neighbours = true) {
  std::vector<KernelRoute> routes = {
      {prefix("10.1.0.0/24"), 0, std::nullopt, 0},
      {prefix("10.2.0.0/24"), 1, std::nullopt, 0},
      {prefix("10.3.0.0/16"), 1, ip("10.2.0.254"), 0},
      {prefix("2001:db8:1::/64"), 0, std::nullopt, 0},
      {prefix("2001:db8:2::/64"), 1, std::nullopt, 0},
  };
  std::vector<Neighbour> neighbours;
  if (with_neighbours) {
    neighbours = {
        {{0, packet::IpVersion::v4, addr("10.1.0.5")}, kClientMac},
        {{1, packet::IpVersion::v4, addr("10.2.0.2")}, kBackendMac},
        {{1, packet::IpVersion::v4, addr("10.2.0.3")}, kBackendMac},
        {{1, packet::IpVersion::v4, addr("10.2.0.4")}, kBackendMac},
        {{1, packet::IpVersion::v4, addr("10.2.0.5")}, kBackendMac},  // a fourth, when added
        {{1, packet::IpVersion::v4, addr("10.2.0.254")}, kRouterMac},
        {{0, packet::IpVersion::v6, addr("2001:db8:1::5")}, kClientMac},
        {{1, packet::IpVersion::v6, addr("2001:db8:2::2")}, kBackendMac},
        {{1, packet::IpVersion::v6, addr("2001:db8:2::3")}, kBackendMac},
    };
  }
  return std::make_shared<const NextHopTables>(
      NextHopTables{KernelRouteTable(std::move(routes)), NeighbourTable(neighbours)});
}

// The ports' facts of an IP hop: their MTUs (0: unknown) and the gateway's addresses on them,
// 10.1.0.1 and 2001:db8:1::1 on port 0, 10.2.0.1 and 2001:db8:2::1 on port 1.
inline std::shared_ptr<const PortFacts> port_facts(std::uint32_t mtu0 = 1500,
                                                   std::uint32_t mtu1 = 1500) {
  auto facts = std::make_shared<PortFacts>();
  facts->mtu[0] = mtu0;
  facts->mtu[1] = mtu1;
  facts->min_mtu = mtu0 == 0 ? mtu1 : mtu1 == 0 ? mtu0 : std::min(mtu0, mtu1);
  facts->v4[0] = {addr("10.1.0.1"), true};
  facts->v4[1] = {addr("10.2.0.1"), true};
  facts->v6[0] = {addr("2001:db8:1::1"), true};
  facts->v6[1] = {addr("2001:db8:2::1"), true};
  return facts;
}

inline std::unique_ptr<Snapshot> snapshot(std::shared_ptr<const ConfigTables> config,
                                          std::shared_ptr<const NextHopTables> next_hops) {
  auto s = std::make_unique<Snapshot>();
  s->config = std::move(config);
  s->next_hops = std::move(next_hops);
  s->port_macs[0] = kPort0Mac;
  s->port_macs[1] = kPort1Mac;
  s->port_count = 2;
  return s;
}

// A client request to the balanced service.
inline packet::test::FrameSpec request(std::uint16_t client_port = 40000) {
  packet::test::FrameSpec f;
  f.src = addr("10.1.0.5");
  f.dst = addr("10.0.0.10");
  f.src_port = client_port;
  f.dst_port = 53;
  f.dst_mac = kPort0Mac;
  f.src_mac = kClientMac;
  return f;
}

// A request with `payload_bytes` of a byte pattern (a misplaced fragment shows): to the balanced
// service, or over IPv6 from 2001:db8:1::5 to 2001:db8::10 port 53 (a service the test adds).
inline packet::test::FrameSpec large_request(std::uint16_t client_port, std::size_t payload_bytes,
                                             packet::IpVersion version = packet::IpVersion::v4) {
  packet::test::FrameSpec f = request(client_port);
  if (version == packet::IpVersion::v6) {
    f.version = version;
    f.src = addr("2001:db8:1::5");
    f.dst = addr("2001:db8::10");
  }
  f.payload.resize(payload_bytes);
  for (std::size_t i = 0; i < payload_bytes; ++i) f.payload[i] = static_cast<std::uint8_t>(i * 7);
  return f;
}

// A backend's reply on its way back to the client.
inline packet::test::FrameSpec reply(const std::string& backend = "10.2.0.3") {
  packet::test::FrameSpec f;
  f.src = addr(backend);
  f.dst = addr("10.1.0.5");
  f.src_port = 53;
  f.dst_port = 40000;
  f.dst_mac = kPort1Mac;
  f.src_mac = kBackendMac;
  return f;
}

// UDP to the configured route's prefix.
inline packet::test::FrameSpec routed(std::uint8_t ttl = 64) {
  packet::test::FrameSpec f;
  f.src = addr("10.1.0.5");
  f.dst = addr("10.3.7.9");
  f.dst_port = 9;
  f.hop_limit = ttl;
  f.dst_mac = kPort0Mac;
  f.src_mac = kClientMac;
  return f;
}

}  // namespace ferry::fastpath::test
