// One AF_XDP socket in plain memory for the worker tests: the worker's QueueRings over UserRings,
// and the kernel's side played by the test: receive() writes a frame into a fill-ring frame and
// posts it on rx; transmit() takes the tx descriptors, returns their bytes and completes them.
#pragma once

#include <linux/if_xdp.h>

#include <cstring>
#include <span>
#include <vector>

#include "lib/xsk/queue_rings.hh"
#include "lib/xsk/user_ring.hh"

namespace ferry::fastpath::test {

class FakePort {
 public:
  static constexpr std::uint32_t kRxOffset = 256;  // XDP_PACKET_HEADROOM, as in copy mode

  FakePort(std::span<std::byte> umem, std::uint32_t frame_bytes, std::uint32_t fill_entries = 128,
           std::uint32_t tx_entries = 128)
      : umem_(umem),
        frame_mask_(frame_bytes - 1ull),
        fill_(fill_entries),
        completion_(fill_entries),
        rx_(fill_entries),
        tx_(tx_entries) {}

  xsk::QueueRings rings() {
    return {xsk::FillRing(fill_.producer()), xsk::CompletionRing(completion_.consumer()),
            xsk::RxRing(rx_.consumer()), xsk::TxRing(tx_.producer())};
  }

  // The kernel receiving a frame: false when the fill ring is empty or rx is full.
  bool receive(const std::vector<std::uint8_t>& bytes) {
    auto frame = kernel_fill_.peek(1);
    if (frame.empty()) return false;
    auto slot = kernel_rx_.reserve(1);
    if (slot.empty()) {
      kernel_fill_.cancel(1);
      return false;
    }
    std::uint64_t addr = (frame[0] & ~frame_mask_) + kRxOffset;
    std::memcpy(umem_.data() + addr, bytes.data(), bytes.size());
    slot[0] = xdp_desc{addr, static_cast<std::uint32_t>(bytes.size()), 0};
    kernel_rx_.submit(1);
    kernel_fill_.release(1);
    return true;
  }

  // The kernel transmitting everything queued on tx; `complete` posts the completions too
  // (otherwise they are held until complete_held()).
  std::vector<std::vector<std::uint8_t>> transmit(bool complete = true) {
    std::vector<std::vector<std::uint8_t>> sent;
    xdp_desc d;
    while (kernel_tx_.pop({&d, 1}) == 1) {
      const auto* p = reinterpret_cast<const std::uint8_t*>(umem_.data() + d.addr);
      sent.emplace_back(p, p + d.len);
      held_.push_back(d.addr);
    }
    if (complete) complete_held();
    return sent;
  }
  void complete_held() {
    std::uint32_t n = kernel_completion_.push(held_);
    held_.erase(held_.begin(), held_.begin() + n);
  }

 private:
  std::span<std::byte> umem_;
  std::uint64_t frame_mask_;
  xsk::UserRing<std::uint64_t> fill_;
  xsk::UserRing<std::uint64_t> completion_;
  xsk::UserRing<xdp_desc> rx_;
  xsk::UserRing<xdp_desc> tx_;
  xsk::ConsumerRing<std::uint64_t> kernel_fill_{fill_.consumer()};
  xsk::ProducerRing<std::uint64_t> kernel_completion_{completion_.producer()};
  xsk::ProducerRing<xdp_desc> kernel_rx_{rx_.producer()};
  xsk::ConsumerRing<xdp_desc> kernel_tx_{tx_.consumer()};
  std::vector<std::uint64_t> held_;
};

}  // namespace ferry::fastpath::test
