// The proxy's connect latency histogram (see proxy_counters.hh).
#include "lib/proxy/proxy_counters.hh"

namespace ferry::proxy {

void ConnectLatency::observe(std::uint64_t ns) {
  const double seconds = static_cast<double>(ns) / 1e9;
  std::size_t i = 0;
  while (i < kBoundsSeconds.size() && seconds > kBoundsSeconds[i]) ++i;
  bump(buckets_[i]);
  bump(sum_ns_, ns);
}

metrics::HistogramValue ConnectLatency::snapshot() const {
  metrics::HistogramValue v;
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < kBoundsSeconds.size(); ++i) {
    running += read(buckets_[i]);
    v.buckets.emplace_back(kBoundsSeconds[i], running);
  }
  v.count = running + read(buckets_.back());
  v.sum = static_cast<double>(read(sum_ns_)) / 1e9;
  return v;
}

}  // namespace ferry::proxy
