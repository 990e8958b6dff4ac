// A provided-buffer ring: count buffers of buffer_bytes cut from one contiguous area, registered
// with one io_uring as a buffer group, plus the shadow bookkeeping that turns a completion's
// (bid, bytes) into memory spans and gives a buffer back only when both the kernel and the
// consumer are done with it.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "lib/metrics/registry.hh"
#include "lib/uring/span_list.hh"
#include "lib/uring/uring.hh"

namespace ferry::uring {

struct BufferRingConfig {
  std::uint32_t count = 256;           // power of two, 1..32768 (tcp.buffers.count)
  std::uint32_t buffer_bytes = 16384;  // tcp.buffers.bytes
  std::uint16_t group_id = 0;          // buffer group id, unique per io_uring
  bool incremental = false;            // ask for IOU_PBUF_RING_INC; dropped if the kernel refuses
};

class BufferRing {
 public:
  // Maps the ring and the buffer area, registers them and provides every buffer in address order.
  // Throws std::invalid_argument on a bad geometry and std::system_error when the kernel refuses.
  BufferRing(Uring& ring, const BufferRingConfig& config);
  ~BufferRing();  // unregisters, then unmaps; cancel the recvs that use the group first
  BufferRing(const BufferRing&) = delete;
  BufferRing& operator=(const BufferRing&) = delete;

  bool incremental() const { return incremental_; }
  std::uint16_t group_id() const { return group_id_; }
  std::uint32_t count() const { return count_; }
  std::uint32_t buffer_bytes() const { return buffer_bytes_; }
  // Bytes of all its buffers together (count() x buffer_bytes()).
  std::uint64_t total_bytes() const { return std::uint64_t{count_} * buffer_bytes_; }
  // Buffers in the ring for the kernel to fill (a partly consumed incremental buffer counts).
  std::uint32_t free_buffers() const { return static_cast<std::uint32_t>(free_.value()); }
  const metrics::Gauge& free_gauge() const { return free_; }
  // Bytes the kernel can still write: the unconsumed rest of every buffer in the ring. The receive
  // engine lends this out as credit to the recvs it arms.
  std::uint64_t free_bytes() const { return free_bytes_; }
  // Buffers out of the ring: consumed by the kernel and not yet released by every consumer.
  std::uint32_t held_buffers() const { return count_ - free_buffers(); }
  const std::byte* area() const { return area_; }
  // Buffers ever put into the ring (initial fill included): grows whenever one comes back.
  std::uint64_t buffers_added() const { return added_; }

  enum class ConsumeStatus {
    ok,
    unknown_buffer,     // the bid is not in the ring by our bookkeeping
    overrun,            // more bytes than the buffers from bid onwards hold
    buf_more_mismatch,  // IORING_CQE_F_BUF_MORE disagrees with the tracked offset
    span_overflow,      // more spans than `out` can hold
  };
  struct Consumed {
    ConsumeStatus status = ConsumeStatus::ok;
    std::uint32_t buffers = 0;     // ring slots the completion touched
    std::uint32_t given_back = 0;  // buffers that went straight back (consumed without data)
    std::uint64_t ring_bytes = 0;  // ring capacity the completion used up (whole buffers unless
                                   // incremental)
  };

  // Resolves one completion: `bytes` were written starting at buffer `bid` at its current offset
  // and, for a bundle, on through the following ring slots (each filled to its end before the
  // next). Appends the bytes to `out` as spans and takes one hold per buffer touched. A
  // non-incremental buffer is done for the kernel once touched; an incremental one once its
  // offset reaches its end (the kernel then clears IORING_CQE_F_BUF_MORE).
  Consumed consume(std::uint16_t bid, std::uint32_t bytes, bool bundle, bool buf_more,
                   SpanList& out);
  // The consumer is done with a span it was handed (or a whole span list). Returns the number of
  // buffers that went back into the ring.
  std::uint32_t release(const iovec& span);
  std::uint32_t release(std::span<const iovec> spans);

 private:
  struct Slot {  // shadow of one ring entry, as we last wrote it
    std::uint16_t bid = 0;
    bool used = false;
    std::byte* addr = nullptr;
    std::uint32_t len = 0;
    std::uint32_t consumed = 0;  // bytes the kernel already wrote (incremental rings)
  };
  struct Buffer {
    std::uint16_t pos = 0;    // ring position (tail value) it was last added at
    std::uint32_t holds = 0;  // spans handed out and not released
    bool in_ring = false;     // the kernel may still write into it
  };

  void kernel_done(std::uint16_t bid, std::uint32_t& given_back);
  bool add_at_tail(std::uint16_t bid);  // false: its slot still holds an unresolved buffer
  void give_back(std::uint16_t bid, std::uint32_t& given_back);
  std::uint32_t publish();  // makes added buffers visible; returns deferred ones it added

  Uring& uring_;
  std::uint32_t count_;
  std::uint32_t buffer_bytes_;
  std::uint16_t group_id_;
  std::uint16_t mask_;
  bool incremental_ = false;
  bool registered_ = false;

  io_uring_buf_ring* ring_ = nullptr;
  std::size_t ring_map_bytes_ = 0;
  std::byte* area_ = nullptr;
  std::size_t area_bytes_ = 0;

  std::uint64_t added_ = 0;
  std::uint16_t tail_ = 0;  // our next position; published with a release store
  std::uint16_t published_tail_ = 0;
  std::uint64_t free_bytes_ = 0;
  std::vector<Slot> slots_;              // slot (position & mask) -> buffer in it
  std::vector<Buffer> buffers_;          // bid -> state; bid i lives at area_ + i * buffer_bytes_
  std::vector<std::uint16_t> deferred_;  // done buffers waiting for their slot to resolve
  metrics::Gauge free_;
};

}  // namespace ferry::uring
