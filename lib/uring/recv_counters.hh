// Per-worker counters of the receive path: single-writer words the worker bumps, read by the
// metrics collector on the control thread (labels worker=...).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "lib/metrics/registry.hh"

namespace ferry::uring {

class BufferRing;

// A histogram with fixed bucket bounds and one writer; buckets are stored non-cumulative.
template <std::size_t N>
class FixedHistogram {
 public:
  explicit constexpr FixedHistogram(const std::array<double, N>& bounds) : bounds_(bounds) {}
  void observe(double v) noexcept {
    std::size_t i = 0;
    while (i < N && v > bounds_[i]) ++i;
    buckets_[i].add();
    sum_.add(static_cast<std::uint64_t>(v));
  }
  std::uint64_t count() const noexcept {
    std::uint64_t total = 0;
    for (const auto& b : buckets_) total += b.value();
    return total;
  }
  // Cumulative buckets, as metrics::HistogramValue wants them.
  metrics::HistogramValue snapshot() const {
    metrics::HistogramValue v;
    std::uint64_t running = 0;
    for (std::size_t i = 0; i < N; ++i) {
      running += buckets_[i].value();
      v.buckets.emplace_back(bounds_[i], running);
    }
    v.count = running + buckets_[N].value();
    v.sum = static_cast<double>(sum_.value());
    return v;
  }

 private:
  std::array<double, N> bounds_;
  std::array<metrics::Counter, N + 1> buckets_{};  // the last one is +Inf
  metrics::Counter sum_;
};

inline constexpr std::array<double, 9> kBuffersPerCqeBounds = {1, 2, 3, 4, 8, 16, 32, 64, 256};
inline constexpr std::array<double, 8> kBytesPerCqeBounds = {512,    4096,   16384,   65536,
                                                             131072, 262144, 1048576, 4194304};

struct RecvCounters {
  metrics::Counter cqes;            // recv completions handled, data or not
  metrics::Counter recv_bytes;      // payload bytes handed to consumers
  metrics::Counter enobufs;         // recvs ended by -ENOBUFS (the ring ran dry)
  metrics::Counter parks;           // sockets parked for buffers (ENOBUFS or a dry ring on re-arm)
  metrics::Counter rearms;          // recvs submitted again after a completion ended one
  metrics::Counter credit_cancels;  // recvs ended early because their ring credit ran out
  metrics::Counter
      credit_shrinks;  // recvs ended early: limit far above their messages, others wait
  metrics::Counter
      drain_rearms;  // recvs ended and armed again: data waited after a drained completion
  metrics::Counter stitched_bytes;   // bytes a consumer had to copy to make them contiguous
  metrics::Counter multi_span_cqes;  // completions that needed more than two spans
  metrics::Counter eofs;             // peers that closed their side
  metrics::Counter errors;           // recvs ended by an error other than ENOBUFS/ECANCELED
  metrics::Counter protocol_errors;  // completions that contradict the buffer bookkeeping
  FixedHistogram<kBuffersPerCqeBounds.size()> buffers_per_cqe{kBuffersPerCqeBounds};
  FixedHistogram<kBytesPerCqeBounds.size()> bytes_per_cqe{kBytesPerCqeBounds};
};

// Exports the counters of one worker's receive path and its buffer ring's occupancy:
// ferry_uring_cqes_total, ferry_uring_recv_bytes_total, ferry_uring_recv_buffers_per_cqe,
// ferry_uring_recv_bytes_per_cqe, ferry_uring_enobufs_total, ferry_uring_parks_total,
// ferry_uring_rearms_total, ferry_uring_credit_cancels_total,
// ferry_uring_credit_shrinks_total, ferry_uring_drain_rearms_total,
// ferry_uring_stitched_bytes_total,
// ferry_uring_recv_multi_span_cqes_total, ferry_uring_recv_closes_total{reason},
// ferry_uring_recv_protocol_errors_total, ferry_uring_buffer_ring_free,
// ferry_uring_buffer_ring_held and ferry_uring_buffer_ring_buffers.
// `counters` and `ring` must outlive the returned handle.
[[nodiscard]] metrics::Registry::Handle register_recv_metrics(metrics::Registry& registry,
                                                              std::string worker,
                                                              const RecvCounters& counters,
                                                              const BufferRing& ring);

}  // namespace ferry::uring
