// The health checker as one of the daemon's planes: it checks the configured backends and writes
// their state on the health board, which the fast path, the proxy and the announcer read; a
// takeover carries each backend's state over, so a backend down stays down until it rises.
#pragma once

#include <functional>
#include <memory>

#include "lib/health/health_checker.hh"
#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"

namespace ferry::lifecycle {

class HealthPlane final : public Plane {
 public:
  // Both are called on the checker's thread: `transition` when a backend goes up or down,
  // `first_pass` when one passes its first check. They may only post to the control thread.
  HealthPlane(PlaneContext context, std::function<void()> transition,
              std::function<void()> first_pass);

  std::string_view name() const override { return "health"; }
  // The carried states go on the board before the checker starts (it takes each backend's from
  // there) and before the fast path builds its tables.
  void start(const config::Config& config, handover::OfferPart* handed) override;
  // Hands `next`'s checked backends to the checker (started on first need) and keeps every
  // configured backend, and only those, on the board (ferry_backend_up shows them).
  void commit(const config::Config& next, ApplyNotes& notes) override;
  void stop() override { checker_.reset(); }
  // Each backend's state: up, and whether it ever passed a check.
  void describe(handover::OfferPart& part) override;
  // The checker runs on until the stop: the board it writes is this process's own.
  void release() override {}

  // The checker (control thread), null until a service has health checks.
  const health::HealthChecker* checker() const { return checker_.get(); }

 private:
  PlaneContext context_;
  std::function<void()> transition_;
  std::function<void()> first_pass_;
  std::unique_ptr<health::HealthChecker> checker_;
};

}  // namespace ferry::lifecycle
