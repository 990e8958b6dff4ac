// RAII owner of one io_uring instance, used by exactly one thread (the worker that created it).
#pragma once

#include <liburing.h>

#include <cstdint>

namespace ferry::uring {

// user_data of internal requests (cancels) whose completions the caller's loop must drop.
inline constexpr std::uint64_t kIgnoredUserData = ~std::uint64_t{0};

struct UringParams {
  unsigned entries = 256;     // SQ size
  unsigned cq_entries = 0;    // 0: 8 x entries, so multishot completions rarely hit overflow
  bool defer_taskrun = true;  // SINGLE_ISSUER|DEFER_TASKRUN, dropped if the kernel refuses
};

class Uring {
 public:
  // Throws std::system_error when io_uring is unavailable (setup time, not the data path).
  explicit Uring(const UringParams& params = {});
  ~Uring();
  Uring(const Uring&) = delete;
  Uring& operator=(const Uring&) = delete;

  io_uring* get() { return &ring_; }
  int fd() const { return ring_.ring_fd; }
  std::uint32_t features() const { return features_; }
  bool defer_taskrun() const { return defer_taskrun_; }

  // A free SQE; submits the queued ones first when the SQ is full. Never null.
  io_uring_sqe* sqe();
  // Submits queued SQEs; returns the count or a negative errno.
  int submit();
  // Submits and waits until at least `min_cqes` completions are ready or `timeout_ms` passed
  // (negative: no timeout). Returns 0, -ETIME on timeout, or another negative errno.
  int submit_and_wait(unsigned min_cqes, int timeout_ms = -1);

  // Calls handle(const io_uring_cqe&) for every ready completion, in ring order, and returns the
  // count. Handlers may queue new SQEs.
  template <typename Handler>
  unsigned drain(Handler&& handle) {
    unsigned total = 0;
    io_uring_cqe* batch[64];
    for (;;) {
      unsigned n = io_uring_peek_batch_cqe(&ring_, batch, 64);
      if (n == 0) return total;
      for (unsigned i = 0; i < n; ++i) handle(*batch[i]);
      io_uring_cq_advance(&ring_, n);
      total += n;
    }
  }

 private:
  io_uring ring_{};
  std::uint32_t features_ = 0;
  bool defer_taskrun_ = false;
};

}  // namespace ferry::uring
