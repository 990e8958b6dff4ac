// Backend health as JSON for the control commands and as metric families.
#include "lib/health/health_report.hh"

#include <chrono>
#include <map>

namespace ferry::health {
namespace {

using Key = std::pair<std::string, std::string>;

std::map<Key, BackendHealth> checked_by_key(const HealthChecker* checker) {
  std::map<Key, BackendHealth> out;
  if (!checker) return out;
  for (auto& h : checker->snapshot()) {
    Key key{h.service, h.backend.to_string()};
    out.emplace(std::move(key), std::move(h));
  }
  return out;
}

}  // namespace

nlohmann::json backend_health_json(const HealthBoard::Entry& entry, const BackendHealth* checked) {
  using nlohmann::json;
  bool has_result = checked && checked->last_check_at;
  json out = {{"service", entry.service},
              {"address", entry.backend.to_string()},
              {"state", !has_result ? "unknown" : entry.up ? "up" : "down"},
              {"up", entry.up},
              {"checked", entry.checked && checked != nullptr}};
  if (!checked) return out;
  out["check"] = config::to_string(checked->type);
  out["check_target"] = checked->target.to_string();
  out["tunnel_mark"] = checked->tunnel_mark ? json(*checked->tunnel_mark) : json();
  out["last_result"] =
      checked->last_result ? json(std::string(to_string(*checked->last_result))) : json();
  out["last_reason"] = checked->last_result ? json(checked->last_reason) : json();
  out["consecutive_failures"] = checked->consecutive_failures;
  out["consecutive_successes"] = checked->consecutive_successes;
  out["last_error"] = checked->last_error ? json(*checked->last_error) : json();
  out["last_check_age_ms"] =
      has_result ? json(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - *checked->last_check_at)
                            .count())
                 : json();
  json checks = json::object();
  for (std::size_t r = 0; r < kCheckResults; ++r) {
    checks[std::string(to_string(static_cast<CheckResult>(r)))] = checked->checks[r];
  }
  out["checks"] = std::move(checks);
  return out;
}

nlohmann::json health_status(const HealthBoard& board, const HealthChecker* checker) {
  auto checked = checked_by_key(checker);
  nlohmann::json backends = nlohmann::json::array();
  std::size_t down = 0;
  for (const auto& e : board.snapshot()) {
    auto it = checked.find({e.service, e.backend.to_string()});
    backends.push_back(backend_health_json(e, it == checked.end() ? nullptr : &it->second));
    down += !e.up;
  }
  return {{"checked", checked.size()}, {"down", down}, {"backends", std::move(backends)}};
}

void collect_health(const HealthBoard& board, const HealthChecker* checker,
                    metrics::SnapshotBuilder& out) {
  for (const auto& e : board.snapshot()) {
    out.gauge("ferry_backend_up",
              "1 if the backend may receive new traffic (health checks passing, or none "
              "configured), 0 if its checks marked it down.",
              {{"service", e.service}, {"backend", e.backend.to_string()}}, e.up ? 1 : 0);
  }
  for (const auto& [key, h] : checked_by_key(checker)) {
    const auto& [service, backend] = key;
    for (std::size_t r = 0; r < kCheckResults; ++r) {
      out.counter("ferry_health_checks_total", "Health checks by how they ended.",
                  {{"service", service},
                   {"backend", backend},
                   {"result", std::string(to_string(static_cast<CheckResult>(r)))}},
                  static_cast<double>(h.checks[r]));
    }
    metrics::HistogramValue duration;
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < kCheckDurationBounds.size(); ++b) {
      cumulative += h.duration_buckets[b];
      duration.buckets.emplace_back(kCheckDurationBounds[b], cumulative);
    }
    duration.count = cumulative + h.duration_buckets.back();
    duration.sum = h.duration_sum_seconds;
    out.histogram("ferry_health_check_duration_seconds",
                  "Time from a health check's start to its result, every result included.",
                  {{"service", service}, {"backend", backend}}, std::move(duration));
    for (auto [to, count] : {std::pair{"up", h.went_up}, {"down", h.went_down}}) {
      out.counter("ferry_health_transitions_total",
                  "Backend state changes made by health checks, by the state entered.",
                  {{"service", service}, {"backend", backend}, {"to", to}},
                  static_cast<double>(count));
    }
  }
}

}  // namespace ferry::health
