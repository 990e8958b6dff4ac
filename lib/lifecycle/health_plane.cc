// The health checker as a plane (see health_plane.hh).
#include "lib/lifecycle/health_plane.hh"

#include "lib/tunnel_check/tunnel_entries.hh"

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
    for (const json& f : handed->fields.value("tunnel_filters", json::array())) {
      handed_filters_[f.value("ifname", "")] = f.value("created_qdisc", false);
    }
  }
  ApplyNotes notes;
  commit(config, notes);
}

void HealthPlane::commit(const config::Config& next, ApplyNotes&) {
  health::HealthBoard& board = context_.health;
  std::set<health::TunnelKey> tunnels = health::tunnel_keys(next.services);
  health::TunnelMarks marks = marks_;
  marks.assign(tunnels);
  std::set<std::string> interfaces;
  if (!tunnels.empty()) {
    // The tunnels are in the map and the program at egress before any check carries a mark.
    if (!tunnel_) tunnel_ = std::make_unique<tunnel_check::TunnelEncap>(context_.registry);
    for (const auto& i : next.xdp.interfaces) interfaces.insert(i.name);
    std::set<std::string> qdiscs_ours;
    for (const auto& [name, created] : handed_filters_) {
      if (created) qdiscs_ours.insert(name);
    }
    tunnel_->apply(
        tunnel_check::tunnel_entries(marks, next.xdp.encap.value_or(config::EncapConfig{})),
        {interfaces.begin(), interfaces.end()}, qdiscs_ours);
  }
  // What the predecessor attached where this ferryd does not: nobody's but ours to remove.
  for (const auto& [name, created] : handed_filters_) {
    if (!interfaces.contains(name)) tunnel_check::ClsactFilter::remove_leftover(name, created);
  }
  handed_filters_.clear();
  marks_ = std::move(marks);
  std::vector<health::CheckTarget> targets = health::check_targets(next.services, &marks_);
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
  // Once no check carries a mark any more (set_targets closed those in flight).
  if (tunnels.empty()) tunnel_.reset();
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
  json filters = json::array();
  if (tunnel_) {
    for (const auto& [name, created] : tunnel_->attachments()) {
      filters.push_back({{"ifname", name}, {"created_qdisc", created}});
    }
  }
  part.fields["tunnel_filters"] = std::move(filters);
}

}  // namespace ferry::lifecycle
