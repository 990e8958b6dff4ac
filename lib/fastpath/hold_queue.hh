// Frames a worker holds while their next hop's MAC is being resolved, as the kernel queues packets
// on an unresolved neighbour: bounded per next hop (bytes, as the kernel's unres_qlen_bytes) and
// per worker (frames, which are UMEM frames taken from its slab), sent in arrival order once a
// snapshot carries the MAC, dropped when the next hop stays unresolved for kTimeout. Owned by one
// worker: no atomics, no allocation.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

#include "lib/fastpath/neighbour_table.hh"

namespace ferry::fastpath {

class HoldQueue {
 public:
  using Clock = std::chrono::steady_clock;

  // Per worker at most; a worker with a small slab holds at most a quarter of it (for_slab()).
  static constexpr std::uint32_t kMaxFrames = 512;
  static constexpr std::uint32_t kMaxHops = 64;  // next hops waiting at once
  // Per next hop, in bytes of the frames held, like the kernel's unresolved queue: a burst of small
  // datagrams (600 DNS answers are 60 KB) fits while the next hop resolves, which takes a few ms on
  // a loaded host; 64 full-size frames fill it.
  static constexpr std::uint32_t kMaxBytesPerHop = 64 * 1024;
  // A next hop that answers ARP / ND does so within a round trip; the kernel declares one FAILED
  // only after about 3 s of probes, and a held datagram older than a second is worth little.
  static constexpr std::chrono::milliseconds kTimeout{1000};

  struct Frame {
    std::uint64_t addr = 0;  // UMEM address
    std::uint32_t len = 0;
    std::uint32_t egress_slot = 0;
    std::uint32_t hop = 0;  // index into hops_
  };

  // Holds at most `max_frames` (<= kMaxFrames) frames at once.
  explicit HoldQueue(std::uint32_t max_frames = kMaxFrames)
      : max_frames_(max_frames < kMaxFrames ? max_frames : kMaxFrames) {}
  // The bound for a worker whose slab has `slab_frames`: a quarter of it, at most kMaxFrames, so
  // an unresolved next hop never starves the fill rings.
  static std::uint32_t for_slab(std::uint32_t slab_frames) { return slab_frames / 4; }
  std::uint32_t max_frames() const { return max_frames_; }

  // Keeps the frame (already rewritten but for its destination MAC) until `next_hop` resolves.
  // False when a bound is reached: the caller drops it.
  bool hold(const NeighbourKey& next_hop, std::uint32_t egress_slot, std::uint64_t addr,
            std::uint32_t len) noexcept;

  bool empty() const { return frame_count_ == 0; }
  std::uint32_t size() const { return frame_count_; }
  std::uint32_t hops_waiting() const;

  // Calls send(const Frame&, const packet::MacAddress&) for every frame whose next hop
  // `neighbours` resolves, in arrival order, and forgets them. Returns how many were sent.
  template <typename Send>
  std::uint32_t release(const NeighbourTable& neighbours, Send&& send) {
    std::array<const packet::MacAddress*, kMaxHops> macs{};
    bool any = false;
    for (std::uint32_t h = 0; h < kMaxHops; ++h) {
      if (hops_[h].frames == 0) continue;
      const NeighbourKey& k = hops_[h].key;
      macs[h] = neighbours.find(k.port, k.version, k.address);
      any |= macs[h] != nullptr;
    }
    if (!any) return 0;
    return remove_if([&](const Frame& f) { return macs[f.hop] != nullptr; },
                     [&](const Frame& f) { send(f, *macs[f.hop]); });
  }

  // Calls drop(const Frame&) for the frames of every next hop first seen waiting kTimeout or more
  // before `now`, and then expired(const NeighbourKey&, std::uint32_t frames) once per such next
  // hop; a next hop's clock starts at the first call that sees it, so the worker reads the clock
  // only while it holds frames, never per frame. Returns how many frames were dropped. The next
  // hop's slot is free after: its next frame is held afresh, with a clock of its own.
  template <typename Drop, typename Expired>
  std::uint32_t expire(Clock::time_point now, Drop&& drop, Expired&& expired) {
    std::array<bool, kMaxHops> timed_out{};
    bool any = false;
    for (std::uint32_t h = 0; h < kMaxHops; ++h) {
      Hop& hop = hops_[h];
      if (hop.frames == 0) continue;
      if (hop.since == Clock::time_point{}) {
        hop.since = now;
      } else if (now - hop.since >= kTimeout) {
        timed_out[h] = true;
        any = true;
      }
    }
    if (!any) return 0;
    // Only on a timeout: the next hops' keys and counts, before remove_if() frees their slots.
    struct Ran {
      NeighbourKey key;
      std::uint32_t frames;
    };
    std::array<Ran, kMaxHops> ran;
    std::uint32_t ran_count = 0;
    for (std::uint32_t h = 0; h < kMaxHops; ++h) {
      if (timed_out[h]) ran[ran_count++] = Ran{hops_[h].key, hops_[h].frames};
    }
    std::uint32_t dropped = remove_if([&](const Frame& f) { return timed_out[f.hop]; }, drop);
    for (std::uint32_t i = 0; i < ran_count; ++i) expired(ran[i].key, ran[i].frames);
    return dropped;
  }

  // Hands every held frame to drop(const Frame&) (the worker stops).
  template <typename Drop>
  std::uint32_t clear(Drop&& drop) {
    return remove_if([](const Frame&) { return true; }, drop);
  }

 private:
  struct Hop {
    NeighbourKey key{};
    std::uint32_t frames = 0;  // 0: the slot is free
    std::uint32_t bytes = 0;
    Clock::time_point since{};  // when expire() first saw it waiting; {} until then
  };

  // Hands the frames `pick` selects to `take` in arrival order and keeps the others in theirs.
  template <typename Pick, typename Take>
  std::uint32_t remove_if(Pick&& pick, Take&& take) {
    std::uint32_t kept = 0;
    for (std::uint32_t i = 0; i < frame_count_; ++i) {
      const Frame f = frames_[i];
      if (pick(f)) {
        Hop& hop = hops_[f.hop];
        --hop.frames;
        hop.bytes -= f.len;
        if (hop.frames == 0) hop = Hop{};
        take(f);
      } else {
        frames_[kept++] = f;
      }
    }
    std::uint32_t removed = frame_count_ - kept;
    frame_count_ = kept;
    return removed;
  }

  std::array<Hop, kMaxHops> hops_{};
  std::array<Frame, kMaxFrames> frames_{};
  std::uint32_t frame_count_ = 0;
  std::uint32_t max_frames_;
};

}  // namespace ferry::fastpath
