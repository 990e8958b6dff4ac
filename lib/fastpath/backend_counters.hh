// A worker's per (service, backend) traffic: a fixed array of counter slots, written by that
// worker only, read by the control thread's collector (ferry_xsk_backend_*_total). The tables
// say which slot each backend counts into (packet::Service::counter_slots, backend_slots.hh).
#pragma once

#include <cstdint>
#include <memory>

#include "lib/metrics/registry.hh"
#include "lib/packet/service_table.hh"

namespace ferry::fastpath {

// Slots per worker: 16 for each of the 1024 services the XDP maps hold (FERRY_MAX_SERVICES),
// 512 KiB per worker. Backends past it are not counted per backend (BackendSlots).
inline constexpr std::uint32_t kBackendSlots = 16384;

// One backend's traffic through one worker: two slots to a cache line, one writer.
struct alignas(32) BackendTraffic {
  metrics::Counter in_packets;   // sent to the backend: requests, their fragments, ICMP errors
  metrics::Counter in_bytes;     // ... their IP bytes (an encapsulated one's inner packet)
  metrics::Counter out_packets;  // the backend's replies (and their fragments) sent to clients
  metrics::Counter out_bytes;    // ... their IP bytes
};

// A slot's counts summed over the workers, as the collector reads them.
struct BackendTotals {
  std::uint64_t in_packets = 0;
  std::uint64_t in_bytes = 0;
  std::uint64_t out_packets = 0;
  std::uint64_t out_bytes = 0;
};

class BackendCounters {
 public:
  explicit BackendCounters(std::uint32_t slots = kBackendSlots)
      : slots_(std::make_unique<BackendTraffic[]>(slots)), size_(slots) {}

  // No-ops for packet::kNoCounterSlot (a backend past the bound, tables built without slots).
  void count_in(std::uint32_t slot, std::uint32_t ip_bytes) noexcept {
    if (slot >= size_) return;
    slots_[slot].in_packets.add();
    slots_[slot].in_bytes.add(ip_bytes);
  }
  void count_out(std::uint32_t slot, std::uint32_t ip_bytes) noexcept {
    if (slot >= size_) return;
    slots_[slot].out_packets.add();
    slots_[slot].out_bytes.add(ip_bytes);
  }

  std::uint32_t size() const { return size_; }
  const BackendTraffic& operator[](std::uint32_t slot) const { return slots_[slot]; }

 private:
  std::unique_ptr<BackendTraffic[]> slots_;
  std::uint32_t size_;
};

}  // namespace ferry::fastpath
