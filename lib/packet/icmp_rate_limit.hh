// The rate at which a worker sends ICMP errors of its own, as the kernel bounds its own
// (net.ipv4.icmp_ratelimit / icmp_msgs_per_sec, the inetpeer token bucket per destination):
// a global bucket and a small per-destination one, hashed, so a flood of expiring or oversized
// datagrams costs a bounded number of errors. No allocation, lock or syscall: the caller passes
// the time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ferry::packet {

class IcmpRateLimit {
 public:
  struct Limits {
    std::uint32_t per_second = 1000;                   // icmp_msgs_per_sec (the whole worker)
    std::uint32_t burst = 50;                          // icmp_msgs_burst
    std::uint32_t per_destination_interval_ms = 1000;  // icmp_ratelimit: one token per interval
    std::uint32_t per_destination_burst = 6;           // XRLIM_BURST_FACTOR
  };
  IcmpRateLimit() : IcmpRateLimit(Limits{}) {}
  explicit IcmpRateLimit(const Limits& limits);

  // True when an error to `destination` (net::IpAddress::bytes layout) may be sent at `now_ms`
  // (any monotonic millisecond clock); takes a token from both buckets then. A clock that steps
  // back refills nothing. Both buckets start full. per_destination_interval_ms = 0 turns the
  // per-destination limit off (as icmp_ratelimit = 0 does); a burst of 0 allows nothing.
  //
  // The per-destination buckets are kDestinationSlots slots picked by a hash of the address, and a
  // slot keeps no address: destinations whose hashes meet share one bucket (as the kernel's
  // inetpeer would not). Sharing only ever limits more, never less, and the global bucket caps
  // the total whatever the slots say.
  bool allow(const std::array<std::uint8_t, 16>& destination, std::uint64_t now_ms) noexcept;

  static constexpr std::size_t kDestinationSlots = 256;

 private:
  // Credit in thousandths of a token (global) or in milliseconds (per destination, one token per
  // interval), so rates that do not divide 1000 refill without drift.
  struct Bucket {
    std::uint64_t stamp_ms = 0;
    std::uint64_t credit = 0;
    bool used = false;
  };
  static void refill(Bucket& b, std::uint64_t now_ms, std::uint64_t per_ms, std::uint64_t full);
  Limits limits_;
  Bucket global_;
  std::array<Bucket, kDestinationSlots> destinations_{};
};

}  // namespace ferry::packet
