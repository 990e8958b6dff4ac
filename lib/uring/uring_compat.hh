// io_uring UAPI values newer than the liburing 2.3 headers, in one place. Each is guarded, so a
// newer liburing that defines them wins and this file still compiles.
#pragma once

#include <liburing.h>

#include <cstddef>
#include <cstdint>

// sqe->ioprio flag for IORING_OP_RECV/SEND: one completion covers a run of provided buffers
// (kernel 6.10).
#ifndef IORING_RECVSEND_BUNDLE
#define IORING_RECVSEND_BUNDLE (1U << 4)
#endif

// io_uring_params.features bit: the kernel understands IORING_RECVSEND_BUNDLE.
#ifndef IORING_FEAT_RECVSEND_BUNDLE
#define IORING_FEAT_RECVSEND_BUNDLE (1U << 14)
#endif

// cqe->flags bit on incrementally consumed buffer rings: the kernel keeps using the rest of the
// buffer named by the completion (kernel 6.12).
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1U << 4)
#endif

namespace ferry::uring::compat {

// enum io_uring_register_pbuf_ring_flags in newer headers (an enum, so no #ifndef can see it):
// buffers of the ring are consumed incrementally, a partial receive leaves the rest in the ring.
inline constexpr std::uint16_t kPbufRingIncremental = 2;

// struct io_uring_buf_reg as the kernel reads it. liburing 2.3 names the flags field `pad` and its
// io_uring_register_buf_ring() ignores its flags argument, so ferry fills this struct itself and
// passes it to io_uring_register(IORING_REGISTER_PBUF_RING) directly.
struct BufRingRegistration {
  std::uint64_t ring_addr = 0;
  std::uint32_t ring_entries = 0;
  std::uint16_t bgid = 0;
  std::uint16_t flags = 0;
  std::uint64_t resv[3] = {0, 0, 0};
};
static_assert(sizeof(BufRingRegistration) == sizeof(io_uring_buf_reg));
static_assert(offsetof(BufRingRegistration, bgid) == offsetof(io_uring_buf_reg, bgid));
static_assert(offsetof(BufRingRegistration, flags) == offsetof(io_uring_buf_reg, bgid) + 2);

// Registers (or unregisters) a provided-buffer ring; returns 0 or a negative errno.
inline int register_buf_ring(int ring_fd, const BufRingRegistration& reg) {
  return io_uring_register(static_cast<unsigned>(ring_fd), IORING_REGISTER_PBUF_RING, &reg, 1);
}
inline int unregister_buf_ring(int ring_fd, std::uint16_t bgid) {
  BufRingRegistration reg;
  reg.bgid = bgid;
  return io_uring_register(static_cast<unsigned>(ring_fd), IORING_UNREGISTER_PBUF_RING, &reg, 1);
}

}  // namespace ferry::uring::compat
