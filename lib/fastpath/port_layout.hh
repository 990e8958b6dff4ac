// Which AF_XDP sockets the fast path binds: every configured interface gets a slot (its port id in
// verdicts and its key prefix in the XSKMAP), and every configured queue index gets one worker.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lib/config/config.hh"
#include "lib/packet/bytes.hh"

namespace ferry::fastpath {

struct PortSpec {
  std::uint32_t slot = 0;  // index in FastpathLayout::ports, < FERRY_MAX_INTERFACES
  std::string ifname;
  int ifindex = 0;
  packet::MacAddress mac{};
  std::vector<std::uint32_t> queues;  // ascending
  config::Tristate zerocopy = config::Tristate::automatic;

  bool has_queue(std::uint32_t q) const;
};

struct FastpathLayout {
  std::vector<PortSpec> ports;        // config order
  std::vector<std::uint32_t> queues;  // union of the ports' queues, ascending: one worker each

  std::optional<std::uint32_t> slot_of(std::string_view ifname) const;
  const PortSpec* port_by_ifindex(int ifindex) const;
};

// What the layout needs to know about the machine; the real one reads it from the kernel, tests
// give their own.
struct InterfaceFacts {
  std::function<int(const std::string& ifname)> ifindex;  // 0: no such interface
  std::function<std::optional<packet::MacAddress>(const std::string& ifname)> mac;
  std::function<std::uint32_t(const std::string& ifname)> rx_queues;  // 0: unknown
};
InterfaceFacts system_interface_facts();

// Resolves names, queue lists ("all" = the device's rx queues) and MACs. Throws
// std::runtime_error naming the interface and what to change.
FastpathLayout resolve_layout(const config::XdpConfig& xdp, const InterfaceFacts& facts);

// False when going from `a` to `b` needs the sockets re-bound (interfaces, queues, zerocopy,
// UMEM or ring sizes, the flow tables changed); true when a reload only has to swap tables.
bool same_socket_layout(const config::XdpConfig& a, const config::XdpConfig& b);

}  // namespace ferry::fastpath
