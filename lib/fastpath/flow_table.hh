// A worker's UDP flow affinity table: a request's forward 5-tuple -> the backend its flow was
// given, so an established flow keeps its backend when the service's backend set changes. Fixed
// memory allocated at construction, 8-way set-associative buckets, idle entries aged out; owned by
// one worker: no allocation, lock, syscall or atomic read-modify-write per packet.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "lib/fastpath/worker_counters.hh"
#include "lib/packet/flow_hash.hh"
#include "lib/packet/parse.hh"
#include "lib/packet/service_table.hh"

namespace ferry::fastpath {

// One flow: its key (the request's 5-tuple as received), its backend by endpoint (the identity
// that survives a rebuilt ServiceTable) and by index (a hint, checked against the endpoint on
// every use), and when it was last seen. One cache line.
struct alignas(64) FlowEntry {
  std::array<std::uint8_t, 16> src_address{};
  std::array<std::uint8_t, 16> dst_address{};  // the VIP
  std::uint64_t ports_protocol = 0;  // src port | dst port << 16 | protocol << 32 | version << 40
  std::array<std::uint8_t, 16> backend_address{};
  std::uint16_t backend_port = 0;
  std::uint16_t backend_index = 0;  // into Service::backends of the table it was last checked on
  std::uint32_t last_seen_ms = 0;   // FlowTable::clock_ms() of the batch that last saw the flow
};
static_assert(sizeof(FlowEntry) == 64);

class FlowTable {
 public:
  static constexpr std::uint32_t kWays = 8;  // entries per bucket: one 8-byte word of tags
  static constexpr std::uint32_t kMaxEntries = 1u << 24;  // 1 GiB per worker
  // Ages are 32-bit millisecond differences: every live entry is looked at (by a lookup or the
  // sweep) far more often than every 2^31 ms, so a wrapped age is never mistaken for a young one.
  static constexpr std::uint32_t kMaxIdleTimeoutMs = (1u << 31) - 1;
  // The bucket hash's seed; when the service table's flow hash seed is the same, a new flow's
  // Maglev lookup reuses the hash.
  static constexpr std::uint64_t kHashSeed = packet::kDefaultFlowHashSeed;

  // `entries`: 0 (off: every request is Maglev's) or a power of two kWays..kMaxEntries;
  // `idle_timeout_ms`: 1..kMaxIdleTimeoutMs. Allocates and zeroes all of it now (so no page is
  // first touched by a packet). Throws std::invalid_argument otherwise. `counters` must outlive it.
  FlowTable(std::uint32_t entries, std::uint32_t idle_timeout_ms, FlowCounters& counters);

  bool enabled() const { return capacity_ != 0; }
  std::uint32_t capacity() const { return capacity_; }
  std::uint32_t idle_timeout_ms() const { return idle_timeout_ms_; }
  std::uint32_t entries_in_use() const { return in_use_; }
  // What the table holds in memory: entries and their tags.
  std::size_t memory_bytes() const { return std::size_t{capacity_} * (sizeof(FlowEntry) + 1); }

  // The backend (index into service.backends) for request `p` of `service`, or
  // packet::MaglevTable::kNoBackend when the service has no backend up. A flow with an entry keeps
  // its backend while the backend is in the service and may keep flows; otherwise (and for a new
  // flow) it gets Maglev's choice, which the entry then records. `flow_hash_seed` is the service
  // table's; `now_ms` is the batch's clock_ms(). Refreshes the entry.
  std::uint16_t backend_for(const packet::Service& service, const packet::ParsedPacket& p,
                            std::uint64_t flow_hash_seed, std::uint32_t now_ms) noexcept;

  // The backend backend_for() would give request `p` now, without creating, refreshing or
  // re-assigning an entry or counting: for an ICMP error about a reply of the flow, which must
  // reach the backend that sent the reply and must not make flows of its own.
  std::uint16_t peek_backend(const packet::Service& service, const packet::ParsedPacket& p,
                             std::uint64_t flow_hash_seed, std::uint32_t now_ms) const noexcept;

  // Frees the entries idle for longer than the timeout among the next `max_slots` slots (a
  // cursor walks the table round), so that entries_in_use() does not count flows long gone.
  // Returns how many it freed.
  std::uint32_t sweep(std::uint32_t now_ms, std::uint32_t max_slots) noexcept;

  // A handover: the entries in use with their slots, for a table of the same capacity in the
  // next ferryd; the clock is system-wide, so their ages carry over too.
  struct Carried {
    std::uint32_t capacity = 0;
    std::vector<std::uint32_t> slots;
    std::vector<std::uint8_t> tags;
    std::vector<FlowEntry> entries;
  };
  Carried carry() const;
  // Takes what carry() gave into this (empty) table. False (nothing taken) when the capacities
  // differ: the flows then go by Maglev's choice again. Throws std::invalid_argument for a slot
  // out of range or given twice.
  bool take(const Carried& carried);

  // A coarse monotonic clock in milliseconds (CLOCK_MONOTONIC_COARSE: vDSO, no syscall, a tick's
  // resolution), wrapping at 2^32: what a worker reads once per batch.
  static std::uint32_t clock_ms() noexcept;
  // The tag (never 0, which marks a free slot) an entry of a flow with this flow hash carries.
  static std::uint8_t tag_of(std::uint64_t hash) noexcept {
    auto t = static_cast<std::uint8_t>(spread(hash) >> 56);
    return t ? t : 1;
  }

 private:
  // flow_hash() mixed once more for placing entries: its bits are even enough for Maglev, but
  // flows that differ only in a source port crowd some buckets (30,000 such flows in 8,192
  // buckets of 8: 643 overflow unmixed, 165 mixed, 150 for random hashes). Buckets use bits
  // 32..52 of it, the tag bits 56..63.
  static std::uint64_t spread(std::uint64_t hash) noexcept {
    return packet::detail::mum(hash ^ packet::detail::kP3, packet::detail::kP2);
  }
  std::uint32_t bucket_of(std::uint64_t hash) const {
    return static_cast<std::uint32_t>(spread(hash) >> 32) & bucket_mask_;
  }
  std::uint16_t start_flow(FlowEntry& e, const packet::Service& s, std::uint16_t backend,
                           std::uint32_t now_ms) noexcept;
  std::uint32_t free_way(std::uint64_t tags, const FlowEntry* ways, std::uint32_t now_ms) noexcept;
  void release(std::uint32_t slot) noexcept;

  std::uint32_t capacity_ = 0;
  std::uint32_t bucket_mask_ = 0;
  std::uint32_t idle_timeout_ms_ = 0;
  std::uint32_t in_use_ = 0;
  std::uint32_t sweep_cursor_ = 0;  // next bucket the sweep looks at
  FlowCounters& counters_;
  std::unique_ptr<FlowEntry[]> entries_;  // bucket b holds entries [b * kWays, (b + 1) * kWays)
  std::unique_ptr<std::uint8_t[]> tags_;  // one per entry, same index; 0 = free
};

}  // namespace ferry::fastpath
