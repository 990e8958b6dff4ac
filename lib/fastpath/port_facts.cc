// Reading the ports' MTUs and addresses (see port_facts.hh).
#include "lib/fastpath/port_facts.hh"

#include <ifaddrs.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <fstream>

namespace ferry::fastpath {

const PortAddress* PortFacts::source_for(std::uint32_t slot,
                                         packet::IpVersion version) const noexcept {
  const auto& addresses = version == packet::IpVersion::v4 ? v4 : v6;
  if (slot < addresses.size() && addresses[slot].present) return &addresses[slot];
  for (const PortAddress& a : addresses) {
    if (a.present) return &a;
  }
  return nullptr;
}

namespace {

std::uint32_t read_mtu(const std::string& ifname) {
  std::ifstream in("/sys/class/net/" + ifname + "/mtu");
  std::uint32_t mtu = 0;
  in >> mtu;
  return in ? mtu : 0;
}

bool is_link_local6(const in6_addr& a) {
  return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80;
}

}  // namespace

PortFacts read_port_facts(const FastpathLayout& layout) {
  PortFacts facts;
  for (const PortSpec& p : layout.ports) {
    if (p.slot >= FERRY_MAX_INTERFACES) continue;
    facts.mtu[p.slot] = read_mtu(p.ifname);
    if (facts.mtu[p.slot] != 0) {
      facts.min_mtu =
          facts.min_mtu == 0 ? facts.mtu[p.slot] : std::min(facts.min_mtu, facts.mtu[p.slot]);
    }
  }
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return facts;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || !a->ifa_name) continue;
    std::optional<std::uint32_t> slot = layout.slot_of(a->ifa_name);
    if (!slot || *slot >= FERRY_MAX_INTERFACES) continue;
    if (a->ifa_addr->sa_family == AF_INET && !facts.v4[*slot].present) {
      const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      std::memcpy(facts.v4[*slot].bytes.data(), &sin->sin_addr, 4);
      facts.v4[*slot].present = true;
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      PortAddress& to = facts.v6[*slot];
      // A global address answers from beyond the link too; a link-local one only if none.
      if (to.present && is_link_local6(sin6->sin6_addr)) continue;
      bool had_global =
          to.present && !is_link_local6(*reinterpret_cast<const in6_addr*>(to.bytes.data()));
      if (had_global) continue;
      std::memcpy(to.bytes.data(), &sin6->sin6_addr, 16);
      to.present = true;
    }
  }
  freeifaddrs(list);
  return facts;
}

}  // namespace ferry::fastpath
