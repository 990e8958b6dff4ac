// The control server as a plane (see control_plane.hh).
#include "lib/lifecycle/control_plane.hh"

namespace ferry::lifecycle {

ControlPlane::ControlPlane(PlaneContext context, const control::CommandTable& commands,
                           const control::AccessPolicy& policy, SocketTaker take_handover)
    : context_(context),
      commands_(commands),
      policy_(policy),
      take_handover_(std::move(take_handover)) {}

// The control socket comes first of all planes: a second ferryd on the same config stops here,
// before it can touch the first one's interfaces. Nothing is accepted before the control
// thread runs, after every plane serves.
void ControlPlane::start(const config::Config& config, handover::OfferPart* handed) {
  server_ = std::make_unique<control::ControlServer>(context_.io, config.control, commands_,
                                                     policy_, context_.registry);
  if (handed) server_->inherit(handed->take_fd("unix"), handed->take_fd("tcp"));
  try {
    server_->start();
  } catch (...) {
    if (handed) server_->stop_accepting();  // the socket file is the running ferryd's
    server_.reset();
    throw;
  }
  server_->set_socket_taker("handover", take_handover_);
  serving_ = config.control;
}

void ControlPlane::commit(const config::Config& next, ApplyNotes& notes) {
  if (!serving_) return;
  const config::ControlConfig& a = *serving_;
  const config::ControlConfig& b = next.control;
  notes.restart_if_changed("control.socket", a.socket, b.socket);
  notes.restart_if_changed("control.mode", a.mode, b.mode);
  notes.restart_if_changed("control.group", a.group, b.group);
  notes.restart_if_changed("control.max_connections", a.max_connections, b.max_connections);
  notes.restart_if_changed("control.admin_reserved_connections", a.admin_reserved_connections,
                           b.admin_reserved_connections);
  notes.restart_if_changed("control.max_connections_per_uid", a.max_connections_per_uid,
                           b.max_connections_per_uid);
  notes.restart_if_changed("control.tcp", a.tcp, b.tcp);
}

void ControlPlane::stop() {
  if (server_) server_->stop();
  server_.reset();
  serving_.reset();
}

void ControlPlane::describe(handover::OfferPart& part) {
  if (!server_) return;
  part.put_fd("unix", duplicate_fd(server_->unix_fd()));
  part.put_fd("tcp", duplicate_fd(server_->tcp_fd()));
}

void ControlPlane::release() {
  if (server_) server_->stop_accepting();
}

}  // namespace ferry::lifecycle
