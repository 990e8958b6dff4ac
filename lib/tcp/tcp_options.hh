// The operator's tcp section turned into what the runtime runs: worker count, io_ready mode and
// index drain (with their FERRY_TASK_* test switches), buffer geometry and the receive modes the
// kernel allows (with FERRY_URING_* switches), and the listener mode (FERRY_TCP_LISTENER).
#pragma once

#include <nlohmann/json.hpp>

#include "lib/config/config.hh"
#include "lib/runtime/runtime.hh"
#include "lib/tcp/listener_socket.hh"
#include "lib/uring/recv_options.hh"

namespace ferry::tcp {

struct TcpOptions {
  runtime::RuntimeConfig runtime;
  ListenerMode listener_mode = ListenerMode::reuseport;
  bool multishot_accept = true;
  nlohmann::json to_json() const;  // what `ferryctl status` shows under "tcp"
};

// Throws std::runtime_error (a startup error with the key to change) when a feature forced "on"
// is missing, std::invalid_argument on a bad environment switch.
TcpOptions tcp_options_from(const config::TcpConfig& tcp, runtime::HeartbeatHook heartbeat);

runtime::IoReadyMode to_runtime(config::IoReadyMode mode);

}  // namespace ferry::tcp
