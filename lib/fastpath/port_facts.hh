// What a worker needs to know of its ports to act as an IP hop: each port's MTU (the largest IP
// packet it sends) and an address of the gateway's on it, the source of the ICMP errors it sends.
// Read on the control thread at every publish and when a link changes (MTU).
#pragma once

#include <array>
#include <cstdint>

#include "bpf/ferry_shared.h"
#include "lib/fastpath/port_layout.hh"
#include "lib/packet/parse.hh"

namespace ferry::fastpath {

struct PortAddress {
  std::array<std::uint8_t, 16> bytes{};  // net::IpAddress::bytes layout
  bool present = false;
  bool operator==(const PortAddress&) const = default;
};

struct PortFacts {
  std::array<std::uint32_t, FERRY_MAX_INTERFACES> mtu{};  // by slot; 0: unknown (no check)
  std::array<PortAddress, FERRY_MAX_INTERFACES> v4{};     // by slot
  std::array<PortAddress, FERRY_MAX_INTERFACES> v6{};     // by slot: global scope preferred
  // The smallest known MTU: a packet no larger needs no check on any port.
  std::uint32_t min_mtu = 0;

  // The source of an error sent out of `slot`: that port's address of the version, else any
  // port's; nullptr when the gateway has none of that version on its ports.
  const PortAddress* source_for(std::uint32_t slot, packet::IpVersion version) const noexcept;
  bool operator==(const PortFacts&) const = default;
};

// The ports' MTUs (/sys/class/net/IF/mtu) and addresses (getifaddrs) now.
PortFacts read_port_facts(const FastpathLayout& layout);

}  // namespace ferry::fastpath
