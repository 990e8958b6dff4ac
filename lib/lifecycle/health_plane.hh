// The health checker as one of the daemon's planes: it checks the configured backends and writes
// their state on the health board, which the fast path, the proxy and the announcer read; a
// takeover carries each backend's state over, so a backend down stays down until it rises. The
// checks of encapsulating services go through their backend's tunnel: the plane owns the TC
// egress program that puts them there (lib/tunnel_check) and the marks that name the tunnels.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "lib/health/health_checker.hh"
#include "lib/health/tunnel_marks.hh"
#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"
#include "lib/tunnel_check/tunnel_encap.hh"

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
  // configured backend, and only those, on the board (ferry_backend_up shows them). When an
  // encapsulating service has checks, first writes their tunnels to the TC program and attaches
  // it at the egress of xdp.interfaces (loaded on first need, removed when none is left);
  // throws when it cannot.
  void commit(const config::Config& next, ApplyNotes& notes) override;
  // The checks, then the tunnel program (its filters detached, the qdiscs it created removed).
  void stop() override {
    checker_.reset();
    tunnel_.reset();
  }
  // Each backend's state: up, and whether it ever passed a check; the tunnel program's
  // attachments and which clsact qdiscs this ferryd created, for the successor to take or remove.
  void describe(handover::OfferPart& part) override;
  // The checker runs on until the stop: the board it writes is this process's own. The tunnel
  // program's filters are the successor's now (it replaced the program at the same handle).
  void release() override {
    if (tunnel_) tunnel_->leave();
  }

  // The checker (control thread), null until a service has health checks.
  const health::HealthChecker* checker() const { return checker_.get(); }
  // The tunnel program (control thread), null while no encapsulating service has checks.
  const tunnel_check::TunnelEncap* tunnel() const { return tunnel_.get(); }

 private:
  PlaneContext context_;
  std::function<void()> transition_;
  std::function<void()> first_pass_;
  std::unique_ptr<health::HealthChecker> checker_;
  health::TunnelMarks marks_;
  std::unique_ptr<tunnel_check::TunnelEncap> tunnel_;
  // The tunnel program's attachments of the ferryd this one took over from: interface -> whether
  // that one created its clsact qdisc. Taken (or removed) by the first commit.
  std::map<std::string, bool> handed_filters_;
};

}  // namespace ferry::lifecycle
