// The XDP program as one of the daemon's planes: the program, its maps and its links, loaded
// afresh or swapped in on the running ferryd's links and maps.
#pragma once

#include <memory>

#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"
#include "lib/xdp/xdp_plane.hh"

namespace ferry::lifecycle {

class XdpProgramPlane final : public Plane {
 public:
  explicit XdpProgramPlane(PlaneContext context) : context_(context) {}

  std::string_view name() const override { return "xdp"; }
  // Creates the plane (taking over the running ferryd's links and maps when handed); the maps
  // are written by apply(), which the fast path's start and commit call.
  void start(const config::Config& config, handover::OfferPart* handed) override;
  // Nothing here: the maps hold the fast path's sockets, so the fast path's commit applies the
  // program between its own steps (AfXdpPlane::commit says in which order).
  void commit(const config::Config& next, ApplyNotes& notes) override;
  void stop() override { plane_.reset(); }
  // The links (fd "link:IFNAME"), the maps (fd "map:NAME") and the services' counter slots.
  void describe(handover::OfferPart& part) override;
  // The links run the successor's program: closing this process's fds detaches nothing.
  void release() override;

  // Brings the attachments and maps in line with `next` (xdp::XdpPlane::apply). Throws once
  // the plane is stopped or handed over (a reload on a connection that outlived the handover).
  void apply(const config::Config& next);
  // The running ferryd's side, when the handover failed after the successor swapped its
  // program in: this one's runs on the links again.
  void reclaim_links() noexcept {
    if (plane_) plane_->reclaim_links();
  }
  // The plane while started (control thread); null otherwise.
  xdp::XdpPlane* plane() const { return plane_.get(); }

 private:
  PlaneContext context_;
  std::unique_ptr<xdp::XdpPlane> plane_;
};

}  // namespace ferry::lifecycle
