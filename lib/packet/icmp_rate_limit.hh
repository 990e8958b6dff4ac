// The rate at which a worker sends ICMP errors of its own, as the kernel bounds its own
// (net.ipv4.icmp_ratelimit / icmp_msgs_per_sec, the inetpeer token bucket per destination):
// a global bucket and a small per-destination one, hashed, so a flood of expiring or oversized
// datagrams costs a bounded number of errors. No allocation, lock or syscall: the caller passes
// the time.
#pragma once

#include <array>
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
  // (any monotonic millisecond clock); takes a token from both buckets then.
  bool allow(const std::array<std::uint8_t, 16>& destination, std::uint64_t now_ms) noexcept;

 private:
  struct Bucket {
    std::uint64_t stamp_ms = 0;
    std::uint32_t tokens = 0;
    bool used = false;
  };
  static constexpr std::size_t kDestinationSlots = 256;
  Limits limits_;
  std::uint64_t global_stamp_ms_ = 0;
  std::uint32_t global_tokens_ = 0;
  bool global_used_ = false;
  std::array<Bucket, kDestinationSlots> destinations_{};
};

}  // namespace ferry::packet
