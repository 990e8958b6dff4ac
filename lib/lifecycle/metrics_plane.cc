// The /metrics server as a plane (see metrics_plane.hh).
#include "lib/lifecycle/metrics_plane.hh"

#include <chrono>

namespace ferry::lifecycle {

void MetricsPlane::start(const config::Config& config, handover::OfferPart* handed) {
  serving_ = config.metrics;
  if (!config.metrics.listen) return;
  const config::MetricsConfig& m = config.metrics;
  metrics::MetricsHttpServerOptions options;
  options.max_connections = m.max_connections;
  options.max_connections_per_source = m.max_connections_per_source;
  options.request_timeout = std::chrono::milliseconds(m.request_timeout_ms);
  server_ = std::make_unique<metrics::MetricsHttpServer>(context_.io, *m.listen, context_.registry,
                                                         options);
  if (handed) server_->inherit(handed->take_fd("listen"));
  try {
    server_->start();
  } catch (...) {
    server_.reset();
    serving_.reset();
    throw;
  }
}

void MetricsPlane::commit(const config::Config& next, ApplyNotes& notes) {
  if (!serving_) return;
  const config::MetricsConfig& m = *serving_;
  const config::MetricsConfig& n = next.metrics;
  notes.restart_if_changed("metrics.listen", m.listen, n.listen);
  notes.restart_if_changed("metrics.max_connections", m.max_connections, n.max_connections);
  notes.restart_if_changed("metrics.max_connections_per_source", m.max_connections_per_source,
                           n.max_connections_per_source);
  notes.restart_if_changed("metrics.request_timeout_ms", m.request_timeout_ms,
                           n.request_timeout_ms);
}

void MetricsPlane::stop() {
  if (server_) server_->stop();
  server_.reset();
  serving_.reset();
}

void MetricsPlane::describe(handover::OfferPart& part) {
  if (server_) part.put_fd("listen", duplicate_fd(server_->listening_fd()));
}

void MetricsPlane::release() {
  if (server_) server_->stop_accepting();
}

}  // namespace ferry::lifecycle
