// Slots, queues and MACs of the fast path's interfaces.
#include "lib/fastpath/port_layout.hh"

#include <dirent.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>

#include "bpf/ferry_shared.h"
#include "lib/common/interface_names.hh"
#include "lib/common/unique_fd.hh"

namespace ferry::fastpath {
namespace {

// real_num_rx_queues, as the kernel lists them: /sys/class/net/IF/queues/rx-N.
std::uint32_t sysfs_rx_queues(const std::string& ifname) {
  std::string path = "/sys/class/net/" + ifname + "/queues";
  DIR* dir = ::opendir(path.c_str());
  if (!dir) return 0;
  std::uint32_t count = 0;
  while (dirent* e = ::readdir(dir)) count += std::strncmp(e->d_name, "rx-", 3) == 0;
  ::closedir(dir);
  return count;
}

std::optional<packet::MacAddress> hardware_address(const std::string& ifname) {
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname.c_str());
  UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd || ::ioctl(fd.get(), SIOCGIFHWADDR, &ifr) != 0) return std::nullopt;
  packet::MacAddress mac;
  std::memcpy(mac.data(), ifr.ifr_hwaddr.sa_data, mac.size());
  return mac;
}

}  // namespace

bool PortSpec::has_queue(std::uint32_t q) const {
  return std::binary_search(queues.begin(), queues.end(), q);
}

std::optional<std::uint32_t> FastpathLayout::slot_of(std::string_view ifname) const {
  for (const PortSpec& p : ports) {
    if (p.ifname == ifname) return p.slot;
  }
  return std::nullopt;
}

const PortSpec* FastpathLayout::port_by_ifindex(int ifindex) const {
  for (const PortSpec& p : ports) {
    if (p.ifindex == ifindex) return &p;
  }
  return nullptr;
}

InterfaceFacts system_interface_facts() {
  return {
      [](const std::string& ifname) { return static_cast<int>(if_nametoindex(ifname.c_str())); },
      hardware_address,
      sysfs_rx_queues,
  };
}

FastpathLayout resolve_layout(const config::XdpConfig& xdp, const InterfaceFacts& facts) {
  if (xdp.interfaces.size() > FERRY_MAX_INTERFACES) {
    throw std::runtime_error("xdp.interfaces: " + std::to_string(xdp.interfaces.size()) +
                             " interfaces; the fast path serves at most " +
                             std::to_string(FERRY_MAX_INTERFACES));
  }
  FastpathLayout layout;
  std::set<std::uint32_t> all_queues;
  for (const config::XdpInterfaceConfig& iface : xdp.interfaces) {
    PortSpec port;
    port.slot = static_cast<std::uint32_t>(layout.ports.size());
    port.ifname = iface.name;
    port.zerocopy = iface.zerocopy;
    port.ifindex = facts.ifindex(iface.name);
    if (port.ifindex == 0) {
      throw std::runtime_error("xdp.interfaces: " + net::no_such_interface(iface.name));
    }
    auto mac = facts.mac(iface.name);
    if (!mac) throw std::runtime_error(iface.name + ": cannot read its MAC address");
    port.mac = *mac;
    std::uint32_t device_queues = facts.rx_queues(iface.name);
    if (iface.queues) {
      port.queues = *iface.queues;
      std::sort(port.queues.begin(), port.queues.end());
      if (device_queues != 0 && port.queues.back() >= device_queues) {
        throw std::runtime_error(iface.name + ": queue " + std::to_string(port.queues.back()) +
                                 " configured but the device has " + std::to_string(device_queues) +
                                 " rx queues (see `ethtool -l " + iface.name +
                                 "`; or set queues to \"all\")");
      }
    } else {
      if (device_queues == 0) {
        throw std::runtime_error(iface.name + ": cannot count its rx queues (no " +
                                 "/sys/class/net/" + iface.name +
                                 "/queues); list them in xdp.interfaces[].queues");
      }
      device_queues = std::min<std::uint32_t>(device_queues, FERRY_MAX_QUEUES);
      for (std::uint32_t q = 0; q < device_queues; ++q) port.queues.push_back(q);
    }
    all_queues.insert(port.queues.begin(), port.queues.end());
    layout.ports.push_back(std::move(port));
  }
  layout.queues.assign(all_queues.begin(), all_queues.end());
  return layout;
}

bool same_socket_layout(const config::XdpConfig& a, const config::XdpConfig& b) {
  // The flow tables are allocated with the workers: a new size or timeout needs new workers.
  if (a.umem != b.umem || a.rings != b.rings || a.flows != b.flows) return false;
  if (a.interfaces.size() != b.interfaces.size()) return false;
  for (std::size_t i = 0; i < a.interfaces.size(); ++i) {
    const auto& x = a.interfaces[i];
    const auto& y = b.interfaces[i];
    // The attach mode is the XDP program's business; sockets do not care.
    if (x.name != y.name || x.queues != y.queues || x.zerocopy != y.zerocopy) return false;
  }
  return true;
}

}  // namespace ferry::fastpath
