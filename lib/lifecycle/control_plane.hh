// The control plane as one of the daemon's planes: the JSON control server on its Unix socket
// (and TCP control when configured), bound afresh or on the running ferryd's listeners.
#pragma once

#include <functional>
#include <memory>
#include <optional>

#include "lib/control/commands.hh"
#include "lib/control/server.hh"
#include "lib/lifecycle/plane.hh"
#include "lib/lifecycle/plane_context.hh"

namespace ferry::lifecycle {

class ControlPlane final : public Plane {
 public:
  using SocketTaker = std::function<void(UniqueFd, const control::Peer&)>;
  // `take_handover` gets the socket of a new ferryd that asks for the handover.
  ControlPlane(PlaneContext context, const control::CommandTable& commands,
               const control::AccessPolicy& policy, SocketTaker take_handover);

  std::string_view name() const override { return "control"; }
  void start(const config::Config& config, handover::OfferPart* handed) override;
  // control.* keys wait for a restart: they are reported, the server stays as it is.
  void commit(const config::Config& next, ApplyNotes& notes) override;
  void stop() override;
  void describe(handover::OfferPart& part) override;
  void release() override;

  // The server while started (control thread); null otherwise.
  control::ControlServer* server() const { return server_.get(); }

 private:
  PlaneContext context_;
  const control::CommandTable& commands_;
  const control::AccessPolicy& policy_;
  SocketTaker take_handover_;
  std::optional<config::ControlConfig> serving_;  // what the server was started with
  std::unique_ptr<control::ControlServer> server_;
};

}  // namespace ferry::lifecycle
