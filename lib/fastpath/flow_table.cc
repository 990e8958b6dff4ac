// The flow affinity table: lookup, insertion with eviction, expiry and the sweep.
#include "lib/fastpath/flow_table.hh"

#include <time.h>

#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "lib/packet/balance.hh"
#include "lib/packet/bytes.hh"

namespace ferry::fastpath {
namespace {

using packet::MaglevTable;

constexpr std::uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;
constexpr std::uint64_t kOnes = 0x0101010101010101ull;

// The high bit of every byte of `x` that is 0 (exact: no borrow runs into the next byte).
std::uint64_t zero_bytes(std::uint64_t x) {
  return ~(((x & kLow7) + kLow7) | x | kLow7);
}

std::uint64_t load_tags(const std::uint8_t* tags) {
  std::uint64_t w;
  std::memcpy(&w, tags, sizeof w);
  return w;
}

std::uint32_t way_of(std::uint64_t match) {
  return static_cast<std::uint32_t>(std::countr_zero(match)) / 8;
}

std::uint64_t ports_protocol_of(const packet::ParsedPacket& p) {
  return std::uint64_t{p.src_port} | std::uint64_t{p.dst_port} << 16 |
         std::uint64_t{p.protocol} << 32 |
         std::uint64_t{static_cast<std::uint8_t>(p.version)} << 40;
}

bool same_flow(const FlowEntry& e, const packet::ParsedPacket& p, std::uint64_t ports_protocol) {
  using packet::load_u64;
  const std::uint8_t* s = p.src_address.data();
  const std::uint8_t* d = p.dst_address.data();
  return ((load_u64(e.src_address.data()) ^ load_u64(s)) |
          (load_u64(e.src_address.data() + 8) ^ load_u64(s + 8)) |
          (load_u64(e.dst_address.data()) ^ load_u64(d)) |
          (load_u64(e.dst_address.data() + 8) ^ load_u64(d + 8)) |
          (e.ports_protocol ^ ports_protocol)) == 0;
}

bool is_backend(const FlowEntry& e, const net::Endpoint& b) {
  return e.backend_port == b.port && e.backend_address == b.address.bytes;
}

// Whether a backend may keep the flows it has. TODO(issue 13): Service::backend_keeps_flows (false
// when disabled by the admin, down by health or removed) once the Service carries it; until then
// a backend keeps its flows while it is up, so backends down by health lose theirs.
bool keeps_flows(const packet::Service& s, std::uint32_t backend) {
  return s.backend_up[backend];
}

// The backend the entry names, in `s`'s indices, if it may keep the flow; kNoBackend if it is gone
// from the service or may not. The index is a hint from the table the entry was last checked on:
// a rebuilt table may have moved the backend, which is then found by its endpoint (once: the
// entry keeps the new index).
std::uint32_t index_of_backend(const FlowEntry& e, const packet::Service& s) {
  std::uint32_t i = e.backend_index;
  if (i >= s.backends.size() || !is_backend(e, s.backends[i])) {
    i = 0;
    while (i < s.backends.size() && !is_backend(e, s.backends[i])) ++i;
  }
  return i;
}

std::uint16_t keeper_of(FlowEntry& e, const packet::Service& s) {
  std::uint32_t i = index_of_backend(e, s);
  if (i == s.backends.size()) return MaglevTable::kNoBackend;
  e.backend_index = static_cast<std::uint16_t>(i);
  return keeps_flows(s, i) ? static_cast<std::uint16_t>(i) : MaglevTable::kNoBackend;
}

void assign(FlowEntry& e, const packet::Service& s, std::uint16_t backend) {
  e.backend_address = s.backends[backend].address.bytes;
  e.backend_port = s.backends[backend].port;
  e.backend_index = backend;
}

}  // namespace

FlowTable::FlowTable(std::uint32_t entries, std::uint32_t idle_timeout_ms, FlowCounters& counters)
    : capacity_(entries), idle_timeout_ms_(idle_timeout_ms), counters_(counters) {
  if (entries == 0) return;
  if (!std::has_single_bit(entries) || entries < kWays || entries > kMaxEntries) {
    throw std::invalid_argument("flow table entries must be 0 (off) or a power of two " +
                                std::to_string(kWays) + ".." + std::to_string(kMaxEntries) +
                                ", not " + std::to_string(entries));
  }
  if (idle_timeout_ms == 0 || idle_timeout_ms > kMaxIdleTimeoutMs) {
    throw std::invalid_argument("flow idle timeout must be 1.." +
                                std::to_string(kMaxIdleTimeoutMs) + " ms");
  }
  bucket_mask_ = entries / kWays - 1;
  entries_.reset(new FlowEntry[entries]());
  tags_.reset(new std::uint8_t[entries]());
  counters_.entries.set(0);
}

std::uint32_t FlowTable::clock_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(static_cast<std::uint64_t>(ts.tv_sec) * 1000u +
                                    static_cast<std::uint64_t>(ts.tv_nsec) / 1000000u);
}

std::uint16_t FlowTable::peek_backend(const packet::Service& s, const packet::ParsedPacket& p,
                                      std::uint64_t flow_hash_seed,
                                      std::uint32_t now_ms) const noexcept {
  if (enabled()) {
    const std::uint64_t hash = packet::flow_hash(p, kHashSeed);
    const std::uint64_t ports_protocol = ports_protocol_of(p);
    const std::uint32_t first = bucket_of(hash) * kWays;
    const std::uint64_t tags = load_tags(&tags_[first]);
    const FlowEntry* ways = &entries_[first];
    for (std::uint64_t m = zero_bytes(tags ^ (kOnes * tag_of(hash))); m != 0; m &= m - 1) {
      const FlowEntry& e = ways[way_of(m)];
      if (!same_flow(e, p, ports_protocol)) continue;
      const std::uint32_t age = now_ms - e.last_seen_ms;
      if (age >= idle_timeout_ms_ || (s.flows_reset && age > now_ms - s.flows_reset_ms)) break;
      std::uint32_t i = index_of_backend(e, s);
      if (i < s.backends.size() && keeps_flows(s, i)) return static_cast<std::uint16_t>(i);
      break;
    }
  }
  return packet::choose_backend(s, p, flow_hash_seed);
}

std::uint16_t FlowTable::backend_for(const packet::Service& s, const packet::ParsedPacket& p,
                                     std::uint64_t flow_hash_seed, std::uint32_t now_ms) noexcept {
  if (!enabled()) return packet::choose_backend(s, p, flow_hash_seed);
  const std::uint64_t hash = packet::flow_hash(p, kHashSeed);
  auto maglev = [&] {
    return s.maglev.lookup(flow_hash_seed == kHashSeed ? hash
                                                       : packet::flow_hash(p, flow_hash_seed));
  };
  const std::uint64_t ports_protocol = ports_protocol_of(p);
  const std::uint32_t first = bucket_of(hash) * kWays;
  const std::uint8_t tag = tag_of(hash);
  const std::uint64_t tags = load_tags(&tags_[first]);
  FlowEntry* ways = &entries_[first];
  for (std::uint64_t m = zero_bytes(tags ^ (kOnes * tag)); m != 0; m &= m - 1) {
    FlowEntry& e = ways[way_of(m)];
    if (!same_flow(e, p, ports_protocol)) continue;
    // Idle too long, or seen last before the service's flows were reset: the flow starts over in
    // its own slot. (A reset older than the timeout leaves no entry it could apply to.)
    const std::uint32_t age = now_ms - e.last_seen_ms;
    if (age >= idle_timeout_ms_ || (s.flows_reset && age > now_ms - s.flows_reset_ms)) {
      counters_.expiries.add();
      std::uint16_t backend = maglev();
      if (backend == MaglevTable::kNoBackend) {
        release(first + way_of(m));
        return backend;
      }
      counters_.misses.add();
      return start_flow(e, s, backend, now_ms);
    }
    std::uint16_t backend = keeper_of(e, s);
    if (backend == MaglevTable::kNoBackend) {
      backend = maglev();
      // No backend up: the entry stays as it is (and ages) for the flow's next packet to try.
      if (backend == MaglevTable::kNoBackend) return backend;
      assign(e, s, backend);
      counters_.reassigned.add();
    } else {
      counters_.hits.add();
    }
    if (e.last_seen_ms != now_ms) e.last_seen_ms = now_ms;  // a line not dirtied needs no writeback
    return backend;
  }
  std::uint16_t backend = maglev();
  if (backend == MaglevTable::kNoBackend) return backend;
  std::uint32_t way = free_way(tags, ways, now_ms);
  FlowEntry& e = ways[way];
  std::memcpy(e.src_address.data(), p.src_address.data(), 16);
  std::memcpy(e.dst_address.data(), p.dst_address.data(), 16);
  e.ports_protocol = ports_protocol;
  tags_[first + way] = tag;
  counters_.misses.add();
  return start_flow(e, s, backend, now_ms);
}

std::uint16_t FlowTable::start_flow(FlowEntry& e, const packet::Service& s, std::uint16_t backend,
                                    std::uint32_t now_ms) noexcept {
  assign(e, s, backend);
  e.last_seen_ms = now_ms;
  return backend;
}

// A free way of the bucket, taking it into use: an empty one; else an expired one; else the least
// recently seen, whose flow is evicted (LRU within the bucket).
std::uint32_t FlowTable::free_way(std::uint64_t tags, const FlowEntry* ways,
                                  std::uint32_t now_ms) noexcept {
  if (std::uint64_t empty = zero_bytes(tags)) {
    ++in_use_;
    counters_.entries.set(in_use_);
    return way_of(empty);
  }
  std::uint32_t oldest = 0;
  std::uint32_t oldest_age = 0;
  for (std::uint32_t w = 0; w < kWays; ++w) {
    std::uint32_t age = now_ms - ways[w].last_seen_ms;
    if (age >= idle_timeout_ms_) {
      counters_.expiries.add();
      return w;
    }
    if (age >= oldest_age) {
      oldest_age = age;
      oldest = w;
    }
  }
  counters_.evictions.add();
  return oldest;
}

FlowTable::Carried FlowTable::carry() const {
  Carried out;
  out.capacity = capacity_;
  out.slots.reserve(in_use_);
  out.tags.reserve(in_use_);
  out.entries.reserve(in_use_);
  for (std::uint32_t slot = 0; slot < capacity_; ++slot) {
    if (tags_[slot] == 0) continue;
    out.slots.push_back(slot);
    out.tags.push_back(tags_[slot]);
    out.entries.push_back(entries_[slot]);
  }
  return out;
}

bool FlowTable::take(const Carried& carried) {
  if (carried.capacity != capacity_ || !enabled()) return false;
  if (carried.slots.size() != carried.entries.size() ||
      carried.tags.size() != carried.entries.size()) {
    throw std::invalid_argument("carried flows: slots, tags and entries differ in number");
  }
  // Checked whole before anything is taken: a bad carry leaves the table as it was.
  std::vector<std::uint8_t> seen(capacity_, 0);
  for (std::size_t i = 0; i < carried.slots.size(); ++i) {
    std::uint32_t slot = carried.slots[i];
    if (slot >= capacity_ || tags_[slot] != 0 || seen[slot]++ || carried.tags[i] == 0) {
      throw std::invalid_argument("carried flows: slot " + std::to_string(slot) +
                                  " out of range or given twice");
    }
  }
  for (std::size_t i = 0; i < carried.slots.size(); ++i) {
    entries_[carried.slots[i]] = carried.entries[i];
    tags_[carried.slots[i]] = carried.tags[i];
    ++in_use_;
  }
  counters_.entries.set(in_use_);
  return true;
}

void FlowTable::release(std::uint32_t slot) noexcept {
  tags_[slot] = 0;
  --in_use_;
  counters_.entries.set(in_use_);
}

std::uint32_t FlowTable::sweep(std::uint32_t now_ms, std::uint32_t max_slots) noexcept {
  if (!enabled()) return 0;
  std::uint32_t buckets = bucket_mask_ + 1;
  std::uint32_t visits = (max_slots + kWays - 1) / kWays;
  if (visits > buckets) visits = buckets;
  std::uint32_t freed = 0;
  for (std::uint32_t v = 0; v < visits; ++v) {
    std::uint32_t first = sweep_cursor_ * kWays;
    sweep_cursor_ = (sweep_cursor_ + 1) & bucket_mask_;
    // Only occupied slots are read: an idle table's sweep touches the tags alone.
    for (std::uint64_t used = ~zero_bytes(load_tags(&tags_[first])) & ~kLow7; used != 0;
         used &= used - 1) {
      std::uint32_t slot = first + way_of(used);
      if (now_ms - entries_[slot].last_seen_ms >= idle_timeout_ms_) {
        release(slot);
        ++freed;
      }
    }
  }
  if (freed) counters_.expiries.add(freed);
  return freed;
}

}  // namespace ferry::fastpath
