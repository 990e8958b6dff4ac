// The control server: a Unix stream socket (and optionally a token-protected TCP listener)
// speaking the line protocol, on the control thread's io_context.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/config/config.hh"
#include "lib/control/commands.hh"
#include "lib/control/control_counters.hh"
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
  // Closes the listeners and every connection, and unlinks the socket file it created (unless it
  // has been replaced since). Idempotent. Call start() and stop() on the control thread, or while
  // the io_context is not running.
  void stop();

  // A handover, new side, before start(): listen on the sockets the previous ferryd listened on
  // (its Unix socket, if control.socket names the same file, and its TCP control listener, if
  // control.tcp.listen is set) instead of binding new ones.
  void inherit(UniqueFd unix_socket, UniqueFd tcp_socket);
  // A handover, old side: the listening sockets (-1 when none), to pass on.
  int unix_fd() const;
  int tcp_fd() const;
  // A handover, old side, once the successor accepts: no more accepts here, and stop() leaves
  // the socket file to the successor. Open connections stay.
  void stop_accepting();
  // A request {"cmd": `command`} from an admin peer on the Unix socket hands the connection's
  // socket to `taker` (a copy of the fd; the connection then closes unanswered): how a new
  // ferryd asks for the handover.
  void set_socket_taker(std::string command, std::function<void(UniqueFd, const Peer&)> taker);

  // Serves a connected stream socket as one the listener of `transport` accepted, from `peer`:
  // over TCP it must send the auth line first, as on the listener. How tests and the control
  // fuzzer speak to the server as any kind of peer (a socketpair end) without connecting. After
  // start(), on the control thread.
  void serve(UniqueFd connected, const Peer& peer, Transport transport);

  // Open client connections; safe to read from any thread.
  std::size_t open_connections() const;

  // The idle limit (default 5 minutes); it applies to connections accepted afterwards. The
  // connection budgets and the auth deadline come from the config (control.max_connections...).
  void set_idle_timeout(std::chrono::milliseconds timeout);
  // The bound TCP listener (useful with port 0), or nullopt when TCP control is off or stopped.
  std::optional<net::Endpoint> tcp_endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::control
