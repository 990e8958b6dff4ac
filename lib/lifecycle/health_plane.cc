// The health checker as a plane (see health_plane.hh).
#include "lib/lifecycle/health_plane.hh"

namespace ferry::lifecycle {

using nlohmann::json;

HealthPlane::HealthPlane(PlaneContext context, std::function<void()> transition,
                         std::function<void()> first_pass)
    : context_(context), transition_(std::move(transition)), first_pass_(std::move(first_pass)) {}

void HealthPlane::start(const config::Config& config, handover::OfferPart* handed) {
  health::HealthBoard& board = context_.health;
  if (handed) {
    for (const json& h : handed->fields.value("backends", json::array())) {
      auto backend = net::Endpoint::parse(h.value("backend", ""));
      if (!backend) continue;
      std::string service = h.value("service", "");
      board.state(service, *backend);
      board.set_up(service, *backend, h.value("up", true));
      if (h.value("passed", false)) board.set_passed(service, *backend);
    }
  }
  ApplyNotes notes;
  commit(config, notes);
}

void HealthPlane::commit(const config::Config& next, ApplyNotes&) {
  health::HealthBoard& board = context_.health;
  std::vector<health::CheckTarget> targets = health::check_targets(next.services);
  if (!checker_ && !targets.empty()) {
    // A backend's first passing check may let its VIP be announced.
    board.subscribe_first_pass([this](const std::string&, const net::Endpoint&) { first_pass_(); });
    board.subscribe([this](const std::string&, const net::Endpoint&, bool) { transition_(); });
    health::HealthCheckerOptions options;
    std::shared_ptr<Heartbeat> beat = context_.heartbeats.enroll("health", "health");
    options.heartbeat = [beat] { beat->beat(); };
    checker_ = std::make_unique<health::HealthChecker>(board, std::move(options));
    checker_->start();
  }
  if (checker_) checker_->set_targets(std::move(targets));
  auto configured = health::configured_backends(next.services);
  board.retain(configured);
  for (const auto& [service, backend] : configured) board.state(service, backend);
}

void HealthPlane::describe(handover::OfferPart& part) {
  json backends = json::array();
  for (const auto& e : context_.health.snapshot()) {
    backends.push_back({{"service", e.service},
                        {"backend", e.backend.to_string()},
                        {"up", e.up},
                        {"passed", context_.health.state(e.service, e.backend)->passed.load()}});
  }
  part.fields["backends"] = std::move(backends);
}

}  // namespace ferry::lifecycle
