// One AF_XDP queue in plain memory for tests: four UserRings, the worker's QueueRings over their
// user-side views, and a simulated kernel side that moves frames fill -> rx and tx -> completion
// and, like the kernel, holds frames in between and publishes its consumer words lazily.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/user_ring.hh"

namespace ferry::xsk::test {

class SimQueue {
 public:
  SimQueue(std::uint32_t fill_entries, std::uint32_t completion_entries, std::uint32_t rx_entries,
           std::uint32_t tx_entries, std::uint32_t frame_bytes, std::uint32_t rx_offset_bytes,
           std::uint32_t initial_index = 0)
      : fill_(fill_entries, initial_index),
        completion_(completion_entries, initial_index),
        rx_(rx_entries, initial_index),
        tx_(tx_entries, initial_index),
        frame_mask_(frame_bytes - 1ull),
        rx_offset_bytes_(rx_offset_bytes) {}

  // The worker's side.
  QueueRings rings() {
    return {FillRing(fill_.producer()), CompletionRing(completion_.consumer()),
            RxRing(rx_.consumer()), TxRing(tx_.producer())};
  }

  // Kernel: takes up to `n` frames off the fill ring into its own hands (consumer word published
  // only when `publish` is set, as the kernel does once per batch).
  std::uint32_t take_fill(std::uint32_t n, bool publish) {
    RingSlices<const std::uint64_t> got = kernel_fill_.peek(n);
    // Aligned-chunk mode: the kernel uses the frame holding the address, whatever the offset.
    for (std::uint32_t i = 0; i < got.size(); ++i) held_rx_.push_back(got[i] & ~frame_mask_);
    unpublished_fill_ += got.size();
    if (publish) publish_fill();
    return got.size();
  }
  void publish_fill() {
    kernel_fill_.release(unpublished_fill_);
    unpublished_fill_ = 0;
  }
  // Kernel: delivers up to `n` held frames to rx, `len` bytes each, past the rx offset.
  std::uint32_t deliver_rx(std::uint32_t n, std::uint32_t len) {
    std::uint32_t k = 0;
    RingSlices<xdp_desc> slots = kernel_rx_.reserve(std::min<std::uint32_t>(n, held_rx_.size()));
    for (; k < slots.size(); ++k) {
      std::uint64_t base = held_rx_.back();
      held_rx_.pop_back();
      slots[k] = xdp_desc{base + rx_offset_bytes_, len, 0};
    }
    kernel_rx_.submit(k);
    return k;
  }
  // Kernel: transmits up to `n` tx descriptors and completes them.
  std::uint32_t transmit(std::uint32_t n) {
    RingSlices<const xdp_desc> sent = kernel_tx_.peek(n);
    RingSlices<std::uint64_t> done = kernel_completion_.reserve(sent.size());
    for (std::uint32_t i = 0; i < done.size(); ++i) done[i] = sent[i].addr;
    kernel_completion_.submit(done.size());
    kernel_tx_.cancel(sent.size() - done.size());
    kernel_tx_.release(done.size());
    return done.size();
  }
  std::uint32_t held() const { return static_cast<std::uint32_t>(held_rx_.size()); }

 private:
  UserRing<std::uint64_t> fill_;
  UserRing<std::uint64_t> completion_;
  UserRing<xdp_desc> rx_;
  UserRing<xdp_desc> tx_;
  std::uint64_t frame_mask_;
  std::uint32_t rx_offset_bytes_;
  ConsumerRing<std::uint64_t> kernel_fill_{fill_.consumer()};
  ProducerRing<std::uint64_t> kernel_completion_{completion_.producer()};
  ProducerRing<xdp_desc> kernel_rx_{rx_.producer()};
  ConsumerRing<xdp_desc> kernel_tx_{tx_.consumer()};
  std::vector<std::uint64_t> held_rx_;
  std::uint32_t unpublished_fill_ = 0;
};

}  // namespace ferry::xsk::test
