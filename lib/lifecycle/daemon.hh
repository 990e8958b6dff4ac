// The daemon's lifecycle: bring every configured part up, tell systemd, supervise (signals,
// watchdog, reload), and tear everything down in reverse order.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lib/config/config.hh"

namespace ferry::lifecycle {

class Daemon {
 public:
  Daemon(std::string config_path, config::Config config);
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Runs until SIGTERM or SIGINT. Returns the process exit code: 0 after a graceful stop, 1 when
  // something configured could not be brought up (the reason is logged).
  int run();

  struct State;  // defined in daemon_state.hh; opaque to everyone else

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ferry::lifecycle
