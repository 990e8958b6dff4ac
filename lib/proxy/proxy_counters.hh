// The proxy's counters: per service and per backend, relaxed atomics because a connection's two
// directions run on whichever workers their tasks are on; bumped per batch or per connection,
// never per byte. Read by the metrics collector and the status view.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "lib/metrics/registry.hh"

namespace ferry::proxy {

inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.fetch_add(n, std::memory_order_relaxed);
}
inline std::uint64_t read(const std::atomic<std::uint64_t>& counter) {
  return counter.load(std::memory_order_relaxed);
}

// Time to establish a backend connection, in seconds.
class ConnectLatency {
 public:
  static constexpr std::array<double, 10> kBoundsSeconds = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                            0.005,  0.01,    0.05,   0.25,  1.0};
  void observe(std::uint64_t ns);
  metrics::HistogramValue snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kBoundsSeconds.size() + 1> buckets_{};  // last: +Inf
  std::atomic<std::uint64_t> sum_ns_{0};
};

// One backend of one service; survives reloads that keep the backend (keyed by its endpoint).
struct BackendStats {
  std::atomic<std::int64_t> active{0};  // least_connections reads it at every choice
  std::atomic<std::uint64_t> total{0};
  std::atomic<std::uint64_t> connect_failures{0};
  std::atomic<std::uint64_t> bytes_in{0};   // sent to the backend
  std::atomic<std::uint64_t> bytes_out{0};  // received from the backend
  ConnectLatency connect_latency;
};

// Why a client's PROXY protocol header was refused (ferry_proxy_header_rejected_total{reason}).
enum class HeaderReject : std::uint8_t { absent, malformed, too_long, truncated, timeout, count };
inline constexpr std::array<const char*, static_cast<std::size_t>(HeaderReject::count)>
    kHeaderRejectNames = {"absent", "malformed", "too_long", "truncated", "timeout"};

struct ServiceCounters {
  std::atomic<std::int64_t> active{0};  // admitted, not yet closed (the per-service cap)
  std::atomic<std::uint64_t> total{0};
  std::atomic<std::uint64_t> refused_service_limit{0};
  std::atomic<std::uint64_t> refused_global_limit{0};
  std::atomic<std::uint64_t> failed{0};
  std::atomic<std::uint64_t> retries{0};
  std::atomic<std::uint64_t> idle_timeouts{0};
  std::atomic<std::uint64_t> resets{0};
  std::atomic<std::uint64_t> bytes_in{0};   // from clients
  std::atomic<std::uint64_t> bytes_out{0};  // to clients
  std::atomic<std::uint64_t> accept_errors{0};
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(HeaderReject::count)>
      header_rejected{};
  // The most unsent bytes one direction of a finished connection ever held (backpressure bound).
  std::atomic<std::uint64_t> peak_held_bytes{0};
};

inline void raise_to(std::atomic<std::uint64_t>& max, std::uint64_t v) {
  std::uint64_t seen = max.load(std::memory_order_relaxed);
  while (v > seen && !max.compare_exchange_weak(seen, v, std::memory_order_relaxed)) {
  }
}

}  // namespace ferry::proxy
