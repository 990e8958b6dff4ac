// Longest-prefix lookup over the kernel's routes out of the fast path's interfaces.
#include "lib/fastpath/kernel_routes.hh"

#include <algorithm>

#include "lib/packet/bytes.hh"

namespace ferry::fastpath {

KernelRouteTable::KernelRouteTable(std::vector<KernelRoute> routes) : routes_(std::move(routes)) {
  std::stable_sort(routes_.begin(), routes_.end(), [](const KernelRoute& a, const KernelRoute& b) {
    if (a.prefix.length != b.prefix.length) return a.prefix.length > b.prefix.length;
    return a.metric < b.metric;
  });
  for (const KernelRoute& r : routes_) {
    std::array<std::uint8_t, 16> mask{};
    for (int bit = 0; bit < r.prefix.length; ++bit) mask[bit / 8] |= 0x80 >> (bit % 8);
    Compiled c{};
    for (int w = 0; w < 2; ++w) {
      c.mask[w] = packet::load_u64(mask.data() + 8 * w);
      c.net[w] = packet::load_u64(r.prefix.address.bytes.data() + 8 * w) & c.mask[w];
    }
    c.version = r.prefix.address.is_v4() ? packet::IpVersion::v4 : packet::IpVersion::v6;
    c.port = r.port;
    compiled_.push_back(c);
  }
}

const KernelRoute* KernelRouteTable::lookup(const std::array<std::uint8_t, 16>& dst,
                                            packet::IpVersion version,
                                            std::uint32_t port) const noexcept {
  std::uint64_t d0 = packet::load_u64(dst.data());
  std::uint64_t d1 = packet::load_u64(dst.data() + 8);
  for (std::size_t i = 0; i < compiled_.size(); ++i) {
    const Compiled& c = compiled_[i];
    if (c.version != version || (port != kAnyPort && c.port != port)) continue;
    if ((d0 & c.mask[0]) == c.net[0] && (d1 & c.mask[1]) == c.net[1]) return &routes_[i];
  }
  return nullptr;
}

}  // namespace ferry::fastpath
