// The TCP services as one of the daemon's planes: the io_uring workers, the echo and proxy
// listeners and their connections (lib/tcp_plane), started afresh or on the running ferryd's
// listeners once the fast path serves.
#pragma once

#include <memory>
#include <optional>

#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"
#include "lib/tcp_plane/tcp_plane.hh"

namespace ferry::lifecycle {

class TcpServicePlane final : public Plane {
 public:
  explicit TcpServicePlane(PlaneContext context) : context_(context) {}

  std::string_view name() const override { return "tcp"; }
  // Afresh, the workers start and listen at once. Taking over, the running ferryd's listeners
  // are kept for serve(), which starts the workers on them after the fast path runs.
  void start(const config::Config& config, handover::OfferPart* handed) override;
  void serve(handover::OfferPart* paused) override;
  // A listener that cannot be bound is an error in `notes`, not a rejection: the rest stands.
  // notes.details["tcp"] is what changed.
  void commit(const config::Config& next, ApplyNotes& notes) override;
  // Listeners, then connections (proxied ones drain), then the io_uring workers.
  void stop() override { plane_.reset(); }
  // Per service its kind, configured address and listening sockets ("listener:SERVICE:N").
  void describe(handover::OfferPart& part) override;
  // No more accepts here; open connections finish within the drain timeout.
  void release() override;

  // The plane while started; null otherwise.
  tcp::TcpPlane* plane() const { return plane_.get(); }

 private:
  PlaneContext context_;
  std::unique_ptr<tcp::TcpPlane> plane_;
  std::optional<config::Config> start_in_serve_;  // a takeover's, until serve()
};

}  // namespace ferry::lifecycle
