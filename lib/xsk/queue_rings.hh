// The four rings of one AF_XDP queue, as distinct types so a fill ring can never be passed where a
// tx ring is meant. Kernel-mapped (XskSocket) and user-space (UserRing) rings use the same types.
#pragma once

#include <linux/if_xdp.h>

#include <cstdint>

#include "lib/xsk/ring.hh"

namespace ferry::xsk {

// Frame addresses handed to the kernel for reception.
class FillRing : public ProducerRing<std::uint64_t> {
 public:
  using ProducerRing::ProducerRing;
};

// Frame addresses of transmitted frames the kernel is done with.
class CompletionRing : public ConsumerRing<std::uint64_t> {
 public:
  using ConsumerRing::ConsumerRing;
};

// Received frames: descriptor address points into a frame, past the headroom.
class RxRing : public ConsumerRing<xdp_desc> {
 public:
  using ConsumerRing::ConsumerRing;
};

// Frames to transmit.
class TxRing : public ProducerRing<xdp_desc> {
 public:
  using ProducerRing::ProducerRing;
};

// One (interface, queue)'s rings; every ring here carries frames of one slab.
struct QueueRings {
  FillRing fill;
  CompletionRing completion;
  RxRing rx;
  TxRing tx;
};

}  // namespace ferry::xsk
