// What status, `services` and /metrics show of backend health: the board's flags joined with the
// checker's streaks and counters.
#pragma once

#include <nlohmann/json.hpp>

#include "lib/health/health_board.hh"
#include "lib/health/health_checker.hh"
#include "lib/metrics/registry.hh"

namespace ferry::health {

// One backend as `ferryctl services` and `status` show it: state is "up" or "down" once checked
// at least once, "unknown" before that or without checks; `up` is whether it takes new traffic.
nlohmann::json backend_health_json(const HealthBoard::Entry& entry, const BackendHealth* checked);

// {"checked": N, "down": N, "backends": [...]} over every backend on the board; `checker` may
// be null (no service has health checks).
nlohmann::json health_status(const HealthBoard& board, const HealthChecker* checker);

// ferry_backend_up for every backend on the board; ferry_health_checks_total and
// ferry_health_transitions_total for the checked ones.
void collect_health(const HealthBoard& board, const HealthChecker* checker,
                    metrics::SnapshotBuilder& out);

}  // namespace ferry::health
