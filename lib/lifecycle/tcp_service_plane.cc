// The TCP services as a plane (see tcp_service_plane.hh).
#include "lib/lifecycle/tcp_service_plane.hh"

#include <fmt/format.h>

namespace ferry::lifecycle {
namespace {

using nlohmann::json;

std::string listener_fd_name(const std::string& service, std::size_t n) {
  return fmt::format("listener:{}:{}", service, n);
}

std::vector<tcp::HandedOverListener> listeners_from(handover::OfferPart& part) {
  std::vector<tcp::HandedOverListener> out;
  for (const json& l : part.fields.value("listeners", json::array())) {
    auto configured = net::Endpoint::parse(l.value("configured", ""));
    if (!configured) continue;
    tcp::HandedOverListener h{l.value("service", ""), l.value("kind", ""), *configured, {}};
    const std::size_t fds = l.value("fds", std::size_t{0});
    for (std::size_t n = 0; n < fds; ++n) {
      h.fds.push_back(part.require_fd(listener_fd_name(h.service, n)));
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace

void TcpServicePlane::start(const config::Config& config, handover::OfferPart* handed) {
  plane_ = std::make_unique<tcp::TcpPlane>(
      context_.registry,
      [this](const std::string& worker) {
        std::shared_ptr<Heartbeat> beat = context_.heartbeats.enroll(worker, "tcp");
        return std::function<void()>([beat] { beat->beat(); });
      },
      &context_.health);
  try {
    if (handed) {
      plane_->inherit_listeners(listeners_from(*handed));
      start_in_serve_ = config;
    } else {
      plane_->start(config);
    }
  } catch (...) {
    plane_.reset();
    throw;
  }
}

void TcpServicePlane::serve(handover::OfferPart*) {
  if (!start_in_serve_) return;
  config::Config config = std::move(*start_in_serve_);
  start_in_serve_.reset();
  plane_->start(config);
}

void TcpServicePlane::commit(const config::Config& next, ApplyNotes& notes) {
  tcp::TcpApplyResult result = plane_->apply(next);
  notes.errors.insert(notes.errors.end(), result.errors.begin(), result.errors.end());
  notes.restart_required.insert(notes.restart_required.end(), result.restart_required.begin(),
                                result.restart_required.end());
  notes.details["tcp"] = result.to_json();
}

void TcpServicePlane::describe(handover::OfferPart& part) {
  json listeners = json::array();
  if (plane_) {
    for (tcp::HandedOverListener& l : plane_->hand_over_listeners()) {
      for (std::size_t n = 0; n < l.fds.size(); ++n) {
        part.put_fd(listener_fd_name(l.service, n), std::move(l.fds[n]));
      }
      listeners.push_back({{"service", l.service},
                           {"kind", l.kind},
                           {"configured", l.configured.to_string()},
                           {"fds", l.fds.size()}});
    }
  }
  part.fields["listeners"] = std::move(listeners);
}

void TcpServicePlane::release() {
  if (plane_) plane_->stop_accepting();
}

}  // namespace ferry::lifecycle
