// How a worker sleeps and is woken (see parker.hh).
#include "lib/runtime/parker.hh"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ferry::runtime {

Parker::Parker() : eventfd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  if (!eventfd_) throw std::system_error(errno, std::generic_category(), "eventfd");
  wake_.parker = this;
}

void Parker::arm_wake(uring::Uring& ring) {
  ring_ = &ring;
  io_uring_sqe* sqe = ring.sqe();
  // A read through io_uring waits for the counter like a poll would, without a syscall of ours.
  io_uring_prep_read(sqe, eventfd_.get(), &wake_.value, sizeof(wake_.value), 0);
  io_uring_sqe_set_data64(sqe, wake_.user_data());
  wake_.armed = true;
}

void Parker::on_wake_read(Completion* self, Worker&, const io_uring_cqe& cqe) {
  auto* wake = static_cast<WakeRead*>(self);
  wake->armed = false;
  if (cqe.res == -ECANCELED) return;  // the ring is being torn down
  // -EAGAIN cannot normally happen (io_uring polls a non-blocking fd), but re-arming is right
  // for every other result too: the read is the only way other threads reach a sleeping worker.
  if (wake->parker->ring_ != nullptr) wake->parker->arm_wake(*wake->parker->ring_);
}

void Parker::park(uring::Uring& ring, int timeout_ms) {
  std::uint32_t expected = kEmpty;
  if (!state_.compare_exchange_strong(expected, kParked, std::memory_order_seq_cst)) {
    state_.store(kEmpty, std::memory_order_seq_cst);  // an unpark came first: consume it
    return;
  }
  ring.submit_and_wait(1, timeout_ms);
  state_.exchange(kEmpty, std::memory_order_seq_cst);
}

bool Parker::take_notification() {
  return state_.exchange(kEmpty, std::memory_order_seq_cst) == kNotified;
}

void Parker::unpark() {
  if (state_.exchange(kNotified, std::memory_order_seq_cst) == kParked) {
    const std::uint64_t one = 1;
    // The counter saturating (EAGAIN) still leaves the fd readable: the wake is not lost.
    [[maybe_unused]] ssize_t n = ::write(eventfd_.get(), &one, sizeof(one));
  }
}

}  // namespace ferry::runtime
