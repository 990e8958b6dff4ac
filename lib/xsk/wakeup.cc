// need_wakeup handling and the idle sleep of a worker.
#include "lib/xsk/wakeup.hh"

#include <sys/socket.h>

#include <cerrno>

namespace ferry::xsk {

Wakeup kick_tx(int xsk_fd, const TxRing& tx, bool uses_need_wakeup) {
  if (uses_need_wakeup && !tx.needs_wakeup()) return Wakeup::not_needed;
  if (::sendto(xsk_fd, nullptr, 0, MSG_DONTWAIT, nullptr, 0) >= 0) return Wakeup::sent;
  return errno == EAGAIN || errno == EBUSY || errno == ENOBUFS ? Wakeup::busy : Wakeup::failed;
}

Wakeup wake_fill(int xsk_fd, const FillRing& fill) {
  if (!fill.needs_wakeup()) return Wakeup::not_needed;
  pollfd pfd{xsk_fd, POLLIN, 0};
  if (::poll(&pfd, 1, 0) >= 0) return Wakeup::sent;
  return errno == EINTR ? Wakeup::busy : Wakeup::failed;
}

int wait_for_rx(std::span<pollfd> fds, int timeout_ms) {
  return ::poll(fds.data(), fds.size(), timeout_ms);
}

}  // namespace ferry::xsk
