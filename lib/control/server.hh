// The control server: a Unix stream socket (and optionally a token-protected TCP listener)
// speaking the line protocol, on the control thread's io_context.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "lib/config/config.hh"
#include "lib/control/commands.hh"
#include "lib/metrics/registry.hh"

namespace ferry::control {

class ControlServer {
 public:
  // Nothing is bound until start().
  ControlServer(boost::asio::io_context& io, const config::ControlConfig& config,
                const CommandTable& commands, const AccessPolicy& policy,
                metrics::Registry& registry);
  ~ControlServer();  // stop()s
  ControlServer(const ControlServer&) = delete;
  ControlServer& operator=(const ControlServer&) = delete;

  // Creates the socket's parent directory (0750) if missing, replaces a stale socket file
  // (nobody answers on it), refuses to start when a live daemon owns it, binds, applies mode and
  // group, and starts accepting; with tcp.listen set, also reads the token file and listens.
  // Throws std::runtime_error with an operator-readable message on failure.
  void start();
  // Closes the listeners and every connection, and unlinks the socket file it created.
  void stop();

  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::control
