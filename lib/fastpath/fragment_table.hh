// The fragments of UDP datagrams a worker translates, without reassembling them: per datagram
// (source, destination, protocol, identification) what its first fragment decided (the address
// its later fragments get), which of its bytes have been seen (a duplicate or an overlap is
// refused), and the later fragments that came before their first, held in their UMEM frames
// until it comes. A datagram all of whose bytes have passed is over: a fragment with its key
// starts a new one, as the kernel's reassembly does once a queue completed (a sender reuses an
// identification within a second at some 65,000 fragmented datagrams a second to one host).
// A refusal lasts held_timeout_ms, then the key starts afresh too; so does an incomplete datagram
// (a fragment of it lost) after max_distance fragments of others, the kernel's ipfrag_max_dist
// counted over the worker instead of per source. Bounded in datagrams, held frames, held bytes and
// time, like the kernel's ipfrag_high_thresh and ipfrag_time. Owned by one worker: no atomics, no
// allocation after construction.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>

#include "lib/fastpath/encap_target.hh"
#include "lib/packet/fragment.hh"
#include "lib/packet/parse.hh"

namespace ferry::fastpath {

struct FragmentKey {
  std::array<std::uint8_t, 16> src{};
  std::array<std::uint8_t, 16> dst{};
  std::uint32_t id = 0;
  packet::IpVersion version = packet::IpVersion::v4;
  bool operator==(const FragmentKey&) const = default;
};
FragmentKey fragment_key(const packet::ParsedPacket& p, const packet::Fragment& f) noexcept;

// What the first fragment decided for the whole datagram.
enum class FragmentRewrite : std::uint8_t {
  none,         // routed: addresses unchanged
  destination,  // a request to a VIP: the destination becomes the backend's address
  source,       // a backend's reply: the source becomes the VIP
  reflect,      // to a reflect service's VIP: the addresses swapped, sent back out of `port`
  encapsulate,  // to an encapsulating service: inside the outer header to `encap`'s backend
};

struct FragmentDecision {
  FragmentRewrite rewrite = FragmentRewrite::none;
  std::array<std::uint8_t, 16> address{};
  std::uint32_t port = 0;  // reflect: the slot of the port the first fragment came in on
  // destination (to a backend), source (its reply): the backend's per-backend counter slot,
  // valid under the tables of build `tables_serial` only (a slot may change hands at a reload).
  std::uint32_t counter_slot = ~0u;  // packet::kNoCounterSlot: none
  std::uint64_t tables_serial = 0;
  EncapTarget encap;  // encapsulate: where every fragment goes, under the same outer header
};

// What record() makes of a fragment.
enum class FragmentSeen : std::uint8_t {
  decided,    // the datagram's first fragment has decided: apply decision()
  undecided,  // its first fragment has not come (or this is it): hold a later one
  duplicate,  // every byte of it was seen before, its datagram still incomplete: drop it (the
              // receiver would)
  overlap,    // it overlaps what was seen without repeating it: the datagram is refused whole
  refused,    // the datagram was refused before (overlap, tiny first fragment, its first
              // fragment dropped): drop it
  too_many,   // more separate pieces than a datagram is tracked with: the datagram is refused
};

class FragmentTable {
 public:
  struct Limits {
    std::uint32_t datagrams = 1024;  // a power of two, in buckets of 4
    std::uint32_t held_frames = 256;
    std::uint32_t held_bytes = 1 << 20;
    // A datagram none of whose fragments came for this long is forgotten (ipfrag_time is 30 s;
    // the decision is 64 bytes, the frames held are not kept this long: held_timeout_ms).
    std::uint32_t idle_timeout_ms = 30000;
    // Later fragments wait this long for their first; UMEM frames are scarcer than skbs.
    std::uint32_t held_timeout_ms = 1000;
    // An incomplete datagram that this many fragments of other datagrams passed since its last
    // one is over: a sender wraps IPv4's 16-bit identification after 65,536 datagrams to a host,
    // at least 131,072 fragments, so a later fragment with its key belongs to a new datagram
    // (what the kernel's ipfrag_max_dist guards against per source, with a bound of 64).
    std::uint32_t max_distance = 65536;
  };
  static constexpr std::uint32_t kMaxPieces = 16;  // separate byte ranges tracked per datagram

  struct HeldFrame {
    std::uint64_t addr = 0;
    std::uint32_t len = 0;
    std::uint32_t datagram = 0;  // slot of its datagram
    std::uint64_t since_ms = 0;
  };

  FragmentTable() : FragmentTable(Limits{}) {}
  explicit FragmentTable(const Limits& limits);

  // The datagram's slot for this fragment (created when new; the least recently seen of a full
  // bucket makes room, its held frames going to `evicted`), and what the fragment's bytes mean.
  // `slot` is valid until the next call that may evict (record, sweep).
  template <typename Evicted>
  FragmentSeen record(const FragmentKey& key, const packet::Fragment& f, std::uint64_t now_ms,
                      std::uint32_t& slot, Evicted&& evicted);
  // The first fragment's decision for the datagram in `slot` (after record() said undecided for
  // it): later fragments get it, and its held ones are to be taken (take_held).
  void decide(std::uint32_t slot, const FragmentDecision& decision) noexcept;
  // The datagram is refused from now on (its first fragment was dropped, or too short).
  void refuse(std::uint32_t slot) noexcept;
  const FragmentDecision& decision(std::uint32_t slot) const { return datagrams_[slot].decision; }
  bool refused(std::uint32_t slot) const { return datagrams_[slot].refused; }

  // Holds a later fragment of the undecided datagram in `slot`; false when a bound is reached
  // (the caller drops it).
  bool hold(std::uint32_t slot, std::uint64_t addr, std::uint32_t len,
            std::uint64_t now_ms) noexcept;
  // Moves the frames held for `slot` into `out` (arrival order) and returns how many; at most
  // out.size(), the rest stay held.
  std::uint32_t take_held(std::uint32_t slot, std::span<HeldFrame> out) noexcept;

  // Forgets idle datagrams and calls expired(const HeldFrame&) for frames held too long (and for
  // the frames of datagrams forgotten). Returns how many frames it gave up.
  template <typename Expired>
  std::uint32_t sweep(std::uint64_t now_ms, Expired&& expired);
  // Every held frame to `drop` (the worker stops).
  template <typename Drop>
  void clear(Drop&& drop);

  std::uint32_t held_count() const { return held_count_; }
  std::uint32_t held_bytes() const { return held_bytes_; }
  std::uint32_t datagrams_in_use() const { return in_use_; }
  const Limits& limits() const { return limits_; }

 private:
  struct Piece {  // bytes [begin, end) of the datagram's IP payload; adjacent ones merged
    std::uint32_t begin = 0;
    std::uint32_t end = 0;
  };
  struct Datagram {
    FragmentKey key;
    FragmentDecision decision;
    std::uint64_t last_ms = 0;
    std::uint64_t refused_ms = 0;   // when it was refused
    std::uint64_t last_seq = 0;     // recorded_ when its last fragment came
    std::uint32_t total_bytes = 0;  // known once the last fragment came; 0 before
    std::uint32_t seen_bytes = 0;
    std::uint8_t pieces = 0;
    bool used = false;
    bool decided = false;
    bool refused = false;
    std::array<Piece, kMaxPieces> seen{};
    bool complete() const { return total_bytes != 0 && seen_bytes == total_bytes; }
  };
  static constexpr std::uint32_t kWays = 4;

  std::uint32_t bucket_of(const FragmentKey& key) const noexcept;
  // Removes the frames held for `slot`, calling give_up on each.
  template <typename GiveUp>
  void drop_held_of(std::uint32_t slot, GiveUp&& give_up);
  FragmentSeen note_bytes(Datagram& d, const packet::Fragment& f) noexcept;
  void forget(std::uint32_t slot) noexcept;

  Limits limits_;
  std::uint32_t bucket_mask_ = 0;
  std::unique_ptr<Datagram[]> datagrams_;
  std::unique_ptr<HeldFrame[]> held_;
  std::uint32_t held_count_ = 0;
  std::uint32_t held_bytes_ = 0;
  std::uint32_t in_use_ = 0;
  std::uint64_t recorded_ = 0;  // fragments recorded so far
};

template <typename GiveUp>
void FragmentTable::drop_held_of(std::uint32_t slot, GiveUp&& give_up) {
  std::uint32_t kept = 0;
  for (std::uint32_t i = 0; i < held_count_; ++i) {
    if (held_[i].datagram == slot) {
      held_bytes_ -= held_[i].len;
      give_up(held_[i]);
    } else {
      held_[kept++] = held_[i];
    }
  }
  held_count_ = kept;
}

template <typename Evicted>
FragmentSeen FragmentTable::record(const FragmentKey& key, const packet::Fragment& f,
                                   std::uint64_t now_ms, std::uint32_t& slot, Evicted&& evicted) {
  const std::uint32_t base = bucket_of(key) * kWays;
  const std::uint64_t seq = ++recorded_;
  std::uint32_t free_way = kWays;
  std::uint32_t oldest_way = 0;
  for (std::uint32_t w = 0; w < kWays; ++w) {
    Datagram& d = datagrams_[base + w];
    if (!d.used) {
      if (free_way == kWays) free_way = w;
      continue;
    }
    if (d.key == key) {
      slot = base + w;
      if (d.complete() || (d.refused && now_ms - d.refused_ms >= limits_.held_timeout_ms) ||
          seq - d.last_seq > limits_.max_distance ||
          now_ms - d.last_ms >= limits_.idle_timeout_ms) {
        drop_held_of(slot, evicted);
        forget(slot);
        free_way = w;
        break;
      }
      d.last_ms = now_ms;
      d.last_seq = seq;
      return note_bytes(d, f);
    }
    // Room is made where a complete datagram was (it is over), else where the least recently
    // seen one was.
    const Datagram& oldest = datagrams_[base + oldest_way];
    if (!oldest.complete() && (d.complete() || d.last_ms < oldest.last_ms)) oldest_way = w;
  }
  if (free_way == kWays) {
    free_way = oldest_way;
    drop_held_of(base + free_way, evicted);
    forget(base + free_way);
  }
  slot = base + free_way;
  Datagram& d = datagrams_[slot];
  d = Datagram{};
  d.key = key;
  d.used = true;
  d.last_ms = now_ms;
  d.last_seq = seq;
  ++in_use_;
  return note_bytes(d, f);
}

template <typename Expired>
std::uint32_t FragmentTable::sweep(std::uint64_t now_ms, Expired&& expired) {
  std::uint32_t given_up = 0;
  std::uint32_t kept = 0;
  for (std::uint32_t i = 0; i < held_count_; ++i) {
    if (now_ms - held_[i].since_ms >= limits_.held_timeout_ms) {
      held_bytes_ -= held_[i].len;
      expired(held_[i]);
      ++given_up;
    } else {
      held_[kept++] = held_[i];
    }
  }
  held_count_ = kept;
  if (in_use_ == 0) return given_up;
  for (std::uint32_t s = 0; s <= bucket_mask_ * kWays + kWays - 1; ++s) {
    Datagram& d = datagrams_[s];
    if (d.used && now_ms - d.last_ms >= limits_.idle_timeout_ms) {
      drop_held_of(s, [&](const HeldFrame& h) {
        expired(h);
        ++given_up;
      });
      forget(s);
    }
  }
  return given_up;
}

template <typename Drop>
void FragmentTable::clear(Drop&& drop) {
  for (std::uint32_t i = 0; i < held_count_; ++i) drop(held_[i]);
  held_count_ = 0;
  held_bytes_ = 0;
}

}  // namespace ferry::fastpath
