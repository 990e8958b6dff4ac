// What every plane of the daemon shares: the control thread's loop, the metrics registry, the
// heartbeat board, and the operator's and the health checker's boards. Owned by Daemon::State,
// which outlives every plane.
#pragma once

#include <boost/asio/io_context.hpp>

#include "lib/admin/admin_board.hh"
#include "lib/health/health_board.hh"
#include "lib/lifecycle/heartbeat.hh"
#include "lib/metrics/registry.hh"

namespace ferry::lifecycle {

struct PlaneContext {
  boost::asio::io_context& io;  // run by the control thread
  metrics::Registry& registry;
  HeartbeatBoard& heartbeats;
  // The operator's drain/disable/weight per backend: set by the `backend` command and the
  // reload on the control thread, read when the planes' tables are built.
  admin::AdminBoard& admin;
  // Backend up/down: written by the health checker's thread, read by the fast path's and the
  // proxy's workers and the control thread (atomics).
  health::HealthBoard& health;
};

}  // namespace ferry::lifecycle
