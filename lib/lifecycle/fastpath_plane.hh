// The AF_XDP fast path as one of the daemon's planes: the UMEM, the sockets and the workers
// (lib/fastpath), the watch that follows their interfaces, and when each VIP's flows were last
// reset. Bound afresh, or adopted from the running ferryd and started in its pause.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "lib/fastpath/fastpath_handover.hh"
#include "lib/fastpath/fastpath_plane.hh"
#include "lib/fastpath/link_watch.hh"
#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"
#include "lib/lifecycle/xdp_program_plane.hh"

namespace ferry::lifecycle {

class AfXdpPlane final : public Plane {
 public:
  // `xdp` holds the XSKMAP the sockets go into; `interface_returned` is posted to the control
  // thread when a followed interface comes back (the daemon re-binds the data planes).
  AfXdpPlane(PlaneContext context, XdpProgramPlane& xdp, std::function<void()> interface_returned);

  std::string_view name() const override { return "fastpath"; }
  // As a commit(); when handed, on the running ferryd's UMEM and sockets, its workers not
  // started until serve() (which starts them on what the running one's carried).
  void start(const config::Config& config, handover::OfferPart* handed) override;
  void serve(handover::OfferPart* paused) override;
  // Checks the tables and, when the sockets must change, that every interface is there.
  void prepare(const config::Config& next) override;
  // Same sockets: the workers' tables first, then the XDP maps, so a service the reload adds is
  // known to the workers before XDP steers its first frame to them. Other sockets: the fast path
  // goes before the program may change (its maps hold the sockets), then the program, then a new
  // fast path is bound. Throws, leaving the caller to commit the running config again.
  void commit(const config::Config& next, ApplyNotes& notes) override;
  void stop() override;
  // The UMEM and sockets (fastpath::describe) and the flow resets by VIP.
  void describe(handover::OfferPart& part) override;
  // Stops the workers (their rings keep what arrives) and writes what each carried, with the
  // time they stopped (fields "paused_at_ns").
  void pause(handover::OfferPart& part) override;
  // The successor owns the sockets: this process's copies close without touching the XSKMAP.
  void release() override;

  // The running ferryd's side when a handover failed after the pause: the workers here may have
  // moved frames, so the plane is dropped (its XSKMAP entries left to the next bind).
  void drop_paused();
  // Rebuilds and publishes the tables from the running config (no-op without a fast path),
  // logging `why` and the time it took; a failure is logged and the previous tables stay.
  void rebuild_tables(std::string_view why);
  // The flows to `vips` are forgotten (announced again after a withdrawal), then the tables.
  void reset_flows(const std::vector<net::IpAddress>& vips);
  // Drops flow resets older than `idle_timeout_ms`: no flow is left for them to apply to, and
  // the 32-bit millisecond clock never wraps around to one.
  void forget_old_resets(std::uint32_t idle_timeout_ms);

  // The fast path while bound (control thread); null otherwise.
  fastpath::FastpathPlane* plane() const { return plane_.get(); }
  // A takeover, after serve(): the pause the fast path saw, in microseconds.
  double pause_us() const { return pause_us_; }

 private:
  fastpath::FastpathHooks hooks();
  void follow_links();

  PlaneContext context_;
  XdpProgramPlane& xdp_;
  std::function<void()> interface_returned_;
  // From a takeover's offer until start() binds on it (none when the config has no interface:
  // the running ferryd's copies then just close with this process's).
  std::optional<fastpath::HandedOverFastpath> handed_;
  std::unique_ptr<fastpath::FastpathPlane> plane_;  // uses xdp_'s maps
  // Follows the fast path's interfaces across re-binds (created with the first plane).
  std::unique_ptr<fastpath::LinkWatch> link_watch_;
  // By VIP: when the fast path's flows to it were last reset (announced again).
  std::map<std::string, std::uint32_t> flows_reset_ms_;
  double pause_us_ = 0;
};

}  // namespace ferry::lifecycle
