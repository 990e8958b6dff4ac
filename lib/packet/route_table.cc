// RouteTable construction and longest-prefix lookup.
#include "lib/packet/route_table.hh"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "lib/packet/bytes.hh"

namespace ferry::packet {

RouteTable RouteTable::build(
    std::span<const config::RouteConfig> routes,
    const std::function<std::optional<std::uint32_t>(std::string_view)>& port_of) {
  RouteTable table;
  for (const config::RouteConfig& r : routes) {
    std::optional<std::uint32_t> port = port_of(r.via);
    if (!port) {
      throw std::invalid_argument("route " + r.prefix.to_string() + ": interface " + r.via +
                                  " is not one of the XDP interfaces");
    }
    table.entries_.push_back({r.prefix, *port, r.protocols.udp, r.protocols.tcp});
  }
  std::stable_sort(
      table.entries_.begin(), table.entries_.end(),
      [](const RouteEntry& a, const RouteEntry& b) { return a.prefix.length > b.prefix.length; });
  for (const RouteEntry& e : table.entries_) {
    std::array<std::uint8_t, 16> mask{};
    for (int bit = 0; bit < e.prefix.length; ++bit) mask[bit / 8] |= 0x80 >> (bit % 8);
    Compiled c{};
    for (int w = 0; w < 2; ++w) {
      c.mask[w] = load_u64(mask.data() + 8 * w);
      c.net[w] = load_u64(e.prefix.address.bytes.data() + 8 * w) & c.mask[w];
    }
    c.version = e.prefix.address.is_v4() ? IpVersion::v4 : IpVersion::v6;
    c.udp = e.udp;
    c.tcp = e.tcp;
    table.compiled_.push_back(c);
  }
  return table;
}

const RouteEntry* RouteTable::lookup(const ParsedPacket& p) const noexcept {
  std::uint64_t dst0 = load_u64(p.dst_address.data());
  std::uint64_t dst1 = load_u64(p.dst_address.data() + 8);
  bool udp = p.protocol == IPPROTO_UDP;
  for (std::size_t i = 0; i < compiled_.size(); ++i) {
    const Compiled& c = compiled_[i];
    if (c.version != p.version || !(udp ? c.udp : c.tcp)) continue;
    if ((dst0 & c.mask[0]) == c.net[0] && (dst1 & c.mask[1]) == c.net[1]) return &entries_[i];
  }
  return nullptr;
}

}  // namespace ferry::packet
