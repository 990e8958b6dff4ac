// Token buckets for the worker's own ICMP errors (see icmp_rate_limit.hh).
#include "lib/packet/icmp_rate_limit.hh"

#include <algorithm>

#include "lib/packet/bytes.hh"

namespace ferry::packet {
namespace {

// A global token is a thousand credits: per_second tokens a second are per_second credits a
// millisecond.
constexpr std::uint64_t kGlobalToken = 1000;

// The slot of a destination: the top byte of a multiplicative hash of both address halves.
std::size_t destination_slot(const std::array<std::uint8_t, 16>& address) {
  std::uint64_t h = load_u64(address.data()) * 0x9e3779b97f4a7c15ull;
  h ^= load_u64(address.data() + 8) * 0xc2b2ae3d27d4eb4full;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return static_cast<std::size_t>(h >> 56) % IcmpRateLimit::kDestinationSlots;
}

}  // namespace

IcmpRateLimit::IcmpRateLimit(const Limits& limits) : limits_(limits) {}

// Adds `per_ms` credit for every millisecond since the bucket's stamp, up to `full`; a bucket
// seen for the first time starts full.
void IcmpRateLimit::refill(Bucket& b, std::uint64_t now_ms, std::uint64_t per_ms,
                           std::uint64_t full) {
  if (!b.used) {
    b = {.stamp_ms = now_ms, .credit = full, .used = true};
    return;
  }
  if (now_ms <= b.stamp_ms) return;
  if (per_ms != 0) {
    // Past the time that fills an empty bucket more time changes nothing; the cap also keeps the
    // product below 2^44 (full < 2^42, per_ms < 2^32).
    std::uint64_t elapsed_ms = std::min(now_ms - b.stamp_ms, full / per_ms + 1);
    b.credit = std::min(full, b.credit + elapsed_ms * per_ms);
  }
  b.stamp_ms = now_ms;
}

bool IcmpRateLimit::allow(const std::array<std::uint8_t, 16>& destination,
                          std::uint64_t now_ms) noexcept {
  refill(global_, now_ms, limits_.per_second, std::uint64_t{limits_.burst} * kGlobalToken);
  // Per destination, as the kernel's inet_peer_xrlim_allow(): credit in milliseconds, a token
  // costing an interval. An interval of 0 (net.ipv4.icmp_ratelimit = 0) does not limit.
  Bucket& slot = destinations_[destination_slot(destination)];
  std::uint64_t interval = limits_.per_destination_interval_ms;
  refill(slot, now_ms, 1, std::uint64_t{limits_.per_destination_burst} * interval);
  if (global_.credit < kGlobalToken || slot.credit < interval) return false;
  global_.credit -= kGlobalToken;
  slot.credit -= interval;
  return true;
}

}  // namespace ferry::packet
