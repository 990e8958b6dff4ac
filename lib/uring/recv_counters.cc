// Per-worker counters of the receive path: single-writer words the worker bumps, read by the
// metrics collector on the control thread (labels worker=...).
#include "lib/uring/recv_counters.hh"

#include <utility>

#include "lib/uring/buffer_ring.hh"

namespace ferry::uring {

metrics::Registry::Handle register_recv_metrics(metrics::Registry& registry, std::string worker,
                                                const RecvCounters& counters,
                                                const BufferRing& ring) {
  return registry.add([worker = std::move(worker), &c = counters,
                       &ring](metrics::SnapshotBuilder& b) {
    const metrics::Labels w = {{"worker", worker}};
    auto count = [](const metrics::Counter& counter) {
      return static_cast<double>(counter.value());
    };
    b.counter("ferry_uring_cqes_total", "Receive completions handled.", w, count(c.cqes));
    b.counter("ferry_uring_recv_bytes_total", "Bytes received through provided buffers.", w,
              count(c.recv_bytes));
    b.histogram("ferry_uring_recv_buffers_per_cqe",
                "Provided buffers consumed per receive completion (bundles take several).", w,
                c.buffers_per_cqe.snapshot());
    b.histogram("ferry_uring_recv_bytes_per_cqe", "Bytes per receive completion.", w,
                c.bytes_per_cqe.snapshot());
    b.counter("ferry_uring_enobufs_total",
              "Receives ended by ENOBUFS: the buffer ring ran dry (raise tcp.buffers.count?).", w,
              count(c.enobufs));
    b.counter("ferry_uring_parks_total", "Sockets parked until buffers were released.", w,
              count(c.parks));
    b.counter("ferry_uring_rearms_total", "Receives submitted again after one ended.", w,
              count(c.rearms));
    b.counter("ferry_uring_credit_cancels_total",
              "Receives ended early because whole buffers used up their ring credit.", w,
              count(c.credit_cancels));
    b.counter(
        "ferry_uring_credit_shrinks_total",
        "Receives ended early to shrink a limit far above their messages while others waited.", w,
        count(c.credit_shrinks));
    b.counter("ferry_uring_drain_rearms_total",
              "Multishot receives armed again because data waited after a completion that had "
              "drained the socket (a wakeup the kernel lost).",
              w, count(c.drain_rearms));
    b.counter("ferry_uring_stitched_bytes_total",
              "Bytes copied to make received data contiguous (0 with bundles).", w,
              count(c.stitched_bytes));
    b.counter("ferry_uring_recv_multi_span_cqes_total",
              "Receive completions whose bytes needed more than two memory spans.", w,
              count(c.multi_span_cqes));
    const char* closes_help = "Receive streams ended, by reason.";
    b.counter("ferry_uring_recv_closes_total", closes_help, {{"worker", worker}, {"reason", "eof"}},
              count(c.eofs));
    b.counter("ferry_uring_recv_closes_total", closes_help,
              {{"worker", worker}, {"reason", "error"}}, count(c.errors));
    b.counter("ferry_uring_recv_protocol_errors_total",
              "Completions that contradicted the buffer bookkeeping (a bug; should stay 0).", w,
              count(c.protocol_errors));
    b.gauge("ferry_uring_buffer_ring_free", "Provided buffers in the ring, ready for the kernel.",
            w, static_cast<double>(ring.free_gauge().value()));
    b.gauge("ferry_uring_buffer_ring_held",
            "Provided buffers out of the ring: received into, not yet released by consumers.", w,
            static_cast<double>(ring.count()) - static_cast<double>(ring.free_gauge().value()));
    b.gauge("ferry_uring_buffer_ring_buffers", "Provided buffers in the buffer ring.", w,
            static_cast<double>(ring.count()));
  });
}

}  // namespace ferry::uring
