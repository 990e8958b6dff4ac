// The daemon's lifecycle: bring every configured part up, tell systemd, supervise (signals,
// watchdog, reload), and tear everything down in reverse order.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "lib/config/config.hh"

namespace ferry::lifecycle {

// ferryd --takeover could not even start (its config is invalid): tells the running ferryd at
// `socket_path` why, so that its upgrade reports it; best effort, never throws.
void report_takeover_failure(const std::string& socket_path, const std::string& why) noexcept;

class Daemon {
 public:
  Daemon(std::string config_path, config::Config config);
  // `log_level` (--log-level, passed on to an upgrade's successor) and `takeover_socket`
  // (--takeover: take over from the ferryd listening there instead of starting afresh).
  void set_start_options(std::string log_level, std::string takeover_socket);
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
