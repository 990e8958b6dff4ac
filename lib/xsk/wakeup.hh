// need_wakeup handling: the syscalls that make the kernel look at a ring again, and the idle
// policy of a worker (bounded busy-poll, then sleep in poll() so an idle daemon uses no CPU).
#pragma once

#include <poll.h>

#include <cstdint>
#include <span>

#include "lib/xsk/queue_rings.hh"

namespace ferry::xsk {

enum class Wakeup {
  not_needed,  // the kernel did not ask; no syscall made
  sent,        // syscall made
  busy,        // syscall made, the kernel could not take it now (EAGAIN/EBUSY/ENOBUFS): retry
  failed,      // syscall made and failed otherwise (ENETDOWN, ENXIO...): errno is set
};

// Kicks transmission with sendto(MSG_DONTWAIT) when the tx ring asks for it, or always when the
// socket was bound without XDP_USE_NEED_WAKEUP (copy mode only transmits inside the syscall).
Wakeup kick_tx(int xsk_fd, const TxRing& tx, bool uses_need_wakeup);

// Wakes the driver to refill from the fill ring with a zero-timeout poll() when the fill ring
// asks for it.
Wakeup wake_fill(int xsk_fd, const FillRing& fill);

// A worker's idle policy: after `spin_limit` loop turns in a row without work, sleep.
class IdleSpin {
 public:
  explicit IdleSpin(std::uint32_t spin_limit) : spin_limit_(spin_limit) {}
  // Call once per loop turn; true when the worker should sleep in wait_for_rx().
  bool should_sleep(bool did_work) {
    if (did_work) {
      idle_turns_ = 0;
      return false;
    }
    return ++idle_turns_ >= spin_limit_;
  }

 private:
  std::uint32_t spin_limit_;
  std::uint32_t idle_turns_ = 0;
};

// Sleeps until one of `fds` (AF_XDP sockets, events POLLIN; any other fd, e.g. an eventfd to
// stop the worker) is ready or `timeout_ms` passes. Returns the number of ready fds, 0 on
// timeout, -1 with errno on error (EINTR included).
int wait_for_rx(std::span<pollfd> fds, int timeout_ms);

}  // namespace ferry::xsk
