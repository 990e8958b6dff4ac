// The /metrics server as a plane (see metrics_plane.hh).
#include "lib/lifecycle/metrics_plane.hh"

namespace ferry::lifecycle {

void MetricsPlane::start(const config::Config& config, handover::OfferPart* handed) {
  serving_ = config.metrics.listen;
  if (!config.metrics.listen) return;
  server_ = std::make_unique<metrics::MetricsHttpServer>(context_.io, *config.metrics.listen,
                                                         context_.registry);
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
  if (serving_ && *serving_ != next.metrics.listen) {
    notes.restart_required.push_back("metrics.listen");
  }
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
