// Everything a worker reads per frame, as one immutable value: the UDP services, the configured
// routes, the kernel's routes and neighbours, and the ports' MACs. Built on the control thread;
// the parts are shared between generations so that a neighbour change does not rebuild Maglev.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "bpf/ferry_shared.h"
#include "lib/fastpath/backend_slots.hh"
#include "lib/fastpath/kernel_routes.hh"
#include "lib/fastpath/neighbour_table.hh"
#include "lib/fastpath/port_facts.hh"
#include "lib/packet/route_table.hh"
#include "lib/packet/service_table.hh"

namespace ferry::fastpath {

// What the kernel says about where destinations are: routes out of our ports, and next-hop MACs.
struct NextHopTables {
  KernelRouteTable routes;
  NeighbourTable neighbours;
};

// What the configuration says: services and routes.
struct ConfigTables {
  packet::ServiceTable services;
  packet::RouteTable routes;
  // Direct server return: the outer header's sources and GUE port (config xdp.encap).
  std::optional<config::EncapConfig> encap;
  // The per-backend counter slots the services' counter_slots name, held while these tables live.
  BackendSlotLease backend_slots;
};

struct Snapshot {
  std::shared_ptr<const ConfigTables> config;
  std::shared_ptr<const NextHopTables> next_hops;
  std::shared_ptr<const PortFacts> ports;  // MTUs and addresses: never null once published
  std::array<packet::MacAddress, FERRY_MAX_INTERFACES> port_macs{};  // by slot
  std::uint32_t port_count = 0;
};

}  // namespace ferry::fastpath
