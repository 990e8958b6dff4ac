// RAII owner of one io_uring instance, used by exactly one thread (the worker that created it).
#include "lib/uring/uring.hh"

#include <cerrno>
#include <cstring>
#include <system_error>

namespace ferry::uring {

Uring::Uring(const UringParams& params) {
  io_uring_params p;
  std::memset(&p, 0, sizeof(p));
  p.flags = IORING_SETUP_CQSIZE;
  p.cq_entries = params.cq_entries != 0 ? params.cq_entries : params.entries * 8;
  if (params.defer_taskrun) p.flags |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int rc = io_uring_queue_init_params(params.entries, &ring_, &p);
  if (rc == -EINVAL && params.defer_taskrun) {
    // Kernels before 6.1 lack DEFER_TASKRUN; task work then runs on any syscall, which is fine.
    std::memset(&p, 0, sizeof(p));
    p.flags = IORING_SETUP_CQSIZE;
    p.cq_entries = params.cq_entries != 0 ? params.cq_entries : params.entries * 8;
    rc = io_uring_queue_init_params(params.entries, &ring_, &p);
  }
  if (rc < 0) throw std::system_error(-rc, std::generic_category(), "io_uring_queue_init");
  features_ = p.features;
  defer_taskrun_ = (p.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
}

Uring::~Uring() {
  io_uring_queue_exit(&ring_);
}

io_uring_sqe* Uring::sqe() {
  for (;;) {
    if (io_uring_sqe* s = io_uring_get_sqe(&ring_)) return s;
    io_uring_submit(&ring_);
  }
}

int Uring::submit() {
  return io_uring_submit(&ring_);
}

int Uring::submit_and_wait(unsigned min_cqes, int timeout_ms) {
  int rc;
  if (timeout_ms < 0) {
    rc = io_uring_submit_and_wait(&ring_, min_cqes);
  } else {
    __kernel_timespec ts{};
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long long>(timeout_ms % 1000) * 1000000;
    io_uring_cqe* cqe = nullptr;
    rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, min_cqes, &ts, nullptr);
  }
  if (rc == -EINTR) return 0;
  return rc < 0 ? rc : 0;
}

}  // namespace ferry::uring
