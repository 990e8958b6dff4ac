// A single-producer single-consumer ring in plain memory with the kernel AF_XDP ring layout
// (producer word, consumer word, flags word, power-of-two entry array), so the same ring code runs
// against it in unit tests and benchmarks, where the test plays the kernel's side.
#pragma once

#include <xdp/xsk.h>

#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>

namespace ferry::xsk {

template <typename Entry>
class UserRing {
 public:
  // `entries` must be a power of two. `initial_index` starts both index words elsewhere than 0 so
  // tests can cross the 2^32 wrap of the free-running indices.
  explicit UserRing(std::uint32_t entries, std::uint32_t initial_index = 0)
      : words_(new Words), entries_(new (std::align_val_t{64}) Entry[entries]()) {
    if (entries == 0 || (entries & (entries - 1)) != 0) {
      throw std::invalid_argument("ring size must be a power of two");
    }
    words_->producer = initial_index;
    words_->consumer = initial_index;
    words_->flags = 0;
    prod_ = view<xsk_ring_prod>(entries);
    prod_.cached_prod = initial_index;
    prod_.cached_cons = initial_index + entries;  // libxdp keeps the producer's view `size` ahead
    cons_ = view<xsk_ring_cons>(entries);
    cons_.cached_prod = initial_index;
    cons_.cached_cons = initial_index;
  }
  UserRing(const UserRing&) = delete;
  UserRing& operator=(const UserRing&) = delete;

  // The producer's and the consumer's view; each side keeps its own cached indices.
  xsk_ring_prod* producer() { return &prod_; }
  xsk_ring_cons* consumer() { return &cons_; }

  // Plays the kernel asking for (or no longer needing) a wakeup syscall.
  void set_need_wakeup(bool on) {
    __atomic_store_n(&words_->flags, on ? XDP_RING_NEED_WAKEUP : 0u, __ATOMIC_RELEASE);
  }
  std::uint32_t size() const { return prod_.size; }

 private:
  // Producer and consumer words on separate cache lines, as in the kernel's struct xdp_ring.
  struct Words {
    alignas(64) std::uint32_t producer;
    alignas(64) std::uint32_t consumer;
    std::uint32_t flags;
  };
  struct AlignedDelete {
    void operator()(Entry* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };

  template <typename View>
  View view(std::uint32_t entries) {
    View v{};
    v.mask = entries - 1;
    v.size = entries;
    v.producer = &words_->producer;
    v.consumer = &words_->consumer;
    v.flags = &words_->flags;
    v.ring = entries_.get();
    return v;
  }

  std::unique_ptr<Words> words_;
  std::unique_ptr<Entry[], AlignedDelete> entries_;
  xsk_ring_prod prod_{};
  xsk_ring_cons cons_{};
};

}  // namespace ferry::xsk
