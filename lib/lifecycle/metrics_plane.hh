// The Prometheus endpoint as one of the daemon's planes: the /metrics HTTP server on
// metrics.listen (none when it is off), bound afresh or on the running ferryd's listener.
#pragma once

#include <memory>
#include <optional>

#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"
#include "lib/metrics/http_server.hh"

namespace ferry::lifecycle {

class MetricsPlane final : public Plane {
 public:
  explicit MetricsPlane(PlaneContext context) : context_(context) {}

  std::string_view name() const override { return "metrics"; }
  void start(const config::Config& config, handover::OfferPart* handed) override;
  // metrics.listen waits for a restart: it is reported, the server stays as it is.
  void commit(const config::Config& next, ApplyNotes& notes) override;
  void stop() override;
  void describe(handover::OfferPart& part) override;
  void release() override;

  // The server while started and listening (control thread); null otherwise.
  metrics::MetricsHttpServer* server() const { return server_.get(); }

 private:
  PlaneContext context_;
  std::optional<config::MetricsConfig> serving_;  // metrics.* as started
  std::unique_ptr<metrics::MetricsHttpServer> server_;
};

}  // namespace ferry::lifecycle
