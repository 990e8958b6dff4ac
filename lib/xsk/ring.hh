// Batch access to one AF_XDP ring (kernel-mapped or user_ring.hh): reserve/submit and
// peek/release hand out the batch as at most two contiguous slices, split once at the wrap.
#pragma once

#include <xdp/xsk.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

namespace ferry::xsk {

// A batch of ring slots: `head` runs from the batch's first index to the end of the array (or the
// end of the batch), `tail` is the wrapped remainder at the start of the array, empty unless the
// batch crosses the wrap. Copies in and out are two memcpy calls, never a loop over ring indices.
template <typename Entry>
struct RingSlices {
  std::span<Entry> head;
  std::span<Entry> tail;

  std::uint32_t size() const { return static_cast<std::uint32_t>(head.size() + tail.size()); }
  bool empty() const { return head.empty(); }
  Entry& operator[](std::uint32_t i) const {
    return i < head.size() ? head[i] : tail[i - head.size()];
  }
  // The first `n` entries (n <= size()).
  RingSlices first(std::uint32_t n) const {
    if (n <= head.size()) return {head.first(n), {}};
    return {head, tail.first(n - head.size())};
  }
  // Everything after the first `n` entries (n <= size()).
  RingSlices drop(std::uint32_t n) const {
    if (n <= head.size()) return {head.subspan(n), tail};
    return {tail.subspan(n - head.size()), {}};
  }
};

// Slices of `count` entries starting at free-running index `index` of a power-of-two array.
template <typename Entry>
RingSlices<Entry> ring_slices(Entry* base, std::uint32_t mask, std::uint32_t index,
                              std::uint32_t count) {
  std::uint32_t start = index & mask;
  std::uint32_t first = std::min(count, mask + 1 - start);
  return {{base + start, first}, {base, count - first}};
}

// GCC 12 cannot bound the tail copy when a caller passes a one-entry object (it does not connect
// the batch size to the caller's span) and warns falsely; the copies are exactly dst.size().
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overread"
#pragma GCC diagnostic ignored "-Wstringop-overflow"

// dst.size() entries from `src` into the ring slots.
template <typename Entry>
void copy_into(const RingSlices<Entry>& dst, const Entry* src) {
  if (dst.empty()) return;  // src may be null then, which memcpy does not allow
  std::memcpy(dst.head.data(), src, dst.head.size_bytes());
  if (!dst.tail.empty()) std::memcpy(dst.tail.data(), src + dst.head.size(), dst.tail.size_bytes());
}

// src.size() entries out of the ring slots into `dst`.
template <typename Entry>
void copy_out(const RingSlices<const Entry>& src, Entry* dst) {
  if (src.empty()) return;  // dst may be null then
  std::memcpy(dst, src.head.data(), src.head.size_bytes());
  if (!src.tail.empty()) std::memcpy(dst + src.head.size(), src.tail.data(), src.tail.size_bytes());
}

#pragma GCC diagnostic pop

// Ring to ring: both sides may wrap at different points, so this is at most three memcpy calls.
// dst.size() must equal src.size().
template <typename Entry>
void copy_between(const RingSlices<const Entry>& src, const RingSlices<Entry>& dst) {
  std::span<const Entry> s = src.head;
  std::span<Entry> d = dst.head;
  bool src_tail_taken = false, dst_tail_taken = false;
  while (!s.empty() && !d.empty()) {
    std::size_t n = std::min(s.size(), d.size());
    std::memcpy(d.data(), s.data(), n * sizeof(Entry));
    s = s.subspan(n);
    d = d.subspan(n);
    if (s.empty() && !src_tail_taken) s = src.tail, src_tail_taken = true;
    if (d.empty() && !dst_tail_taken) d = dst.tail, dst_tail_taken = true;
  }
}

// The side of a ring this process produces into (fill, tx). A handle: copies share the ring.
// The cached indices live in the libxdp xsk_ring_prod, so handles stay consistent.
template <typename Entry>
class ProducerRing {
 public:
  ProducerRing() = default;
  explicit ProducerRing(xsk_ring_prod* ring) : ring_(ring) {}

  std::uint32_t capacity() const { return ring_->size; }

  // Claims up to `max` free slots (fewer when the ring is fuller). Reads the consumer word only
  // when the cached view says there is not enough room.
  RingSlices<Entry> reserve(std::uint32_t max) {
    std::uint32_t n = std::min(max, xsk_prod_nb_free(ring_, max));
    std::uint32_t index = ring_->cached_prod;
    ring_->cached_prod += n;
    return ring_slices(entries(), ring_->mask, index, n);
  }
  // Publishes the oldest `count` reserved slots with one release store of the producer word.
  void submit(std::uint32_t count) { xsk_ring_prod__submit(ring_, count); }
  // Gives back the newest `count` reserved, unsubmitted slots.
  void cancel(std::uint32_t count) { ring_->cached_prod -= count; }

  // reserve + copy + submit; returns how many of `items` went in.
  std::uint32_t push(std::span<const Entry> items) {
    RingSlices<Entry> slots = reserve(static_cast<std::uint32_t>(items.size()));
    copy_into(slots, items.data());
    submit(slots.size());
    return slots.size();
  }

  // True when the kernel wants a syscall before it looks at this ring again (XDP_USE_NEED_WAKEUP).
  bool needs_wakeup() const { return xsk_ring_prod__needs_wakeup(ring_) != 0; }

  // The shared index words, for occupancy accounting.
  std::uint32_t producer_word() const { return __atomic_load_n(ring_->producer, __ATOMIC_RELAXED); }
  std::uint32_t consumer_word() const { return __atomic_load_n(ring_->consumer, __ATOMIC_ACQUIRE); }

  xsk_ring_prod* raw() const { return ring_; }
  bool valid() const { return ring_ != nullptr; }

 private:
  Entry* entries() const { return static_cast<Entry*>(ring_->ring); }
  xsk_ring_prod* ring_ = nullptr;
};

// The side of a ring this process consumes from (rx, completion).
template <typename Entry>
class ConsumerRing {
 public:
  ConsumerRing() = default;
  explicit ConsumerRing(xsk_ring_cons* ring) : ring_(ring) {}

  std::uint32_t capacity() const { return ring_->size; }

  // Up to `max` filled slots. Reads the producer word only when the cached view holds fewer
  // than `max` (libxdp's peek waits until the cache is empty, which gives short batches).
  RingSlices<const Entry> peek(std::uint32_t max) {
    std::uint32_t available = ring_->cached_prod - ring_->cached_cons;
    if (available < max) {
      ring_->cached_prod = __atomic_load_n(ring_->producer, __ATOMIC_ACQUIRE);
      available = ring_->cached_prod - ring_->cached_cons;
    }
    std::uint32_t n = std::min(available, max);
    std::uint32_t index = ring_->cached_cons;
    ring_->cached_cons += n;
    return ring_slices<const Entry>(entries(), ring_->mask, index, n);
  }
  // Hands the oldest `count` peeked slots back to the producer (one release store).
  void release(std::uint32_t count) { xsk_ring_cons__release(ring_, count); }
  // Un-peeks the newest `count` peeked, unreleased slots.
  void cancel(std::uint32_t count) { xsk_ring_cons__cancel(ring_, count); }

  // peek + copy + release; returns how many entries were written to `out`.
  std::uint32_t pop(std::span<Entry> out) {
    RingSlices<const Entry> slots = peek(static_cast<std::uint32_t>(out.size()));
    copy_out(slots, out.data());
    release(slots.size());
    return slots.size();
  }

  std::uint32_t producer_word() const { return __atomic_load_n(ring_->producer, __ATOMIC_ACQUIRE); }
  std::uint32_t consumer_word() const { return __atomic_load_n(ring_->consumer, __ATOMIC_RELAXED); }

  xsk_ring_cons* raw() const { return ring_; }
  bool valid() const { return ring_ != nullptr; }

 private:
  const Entry* entries() const { return static_cast<const Entry*>(ring_->ring); }
  xsk_ring_cons* ring_ = nullptr;
};

}  // namespace ferry::xsk
