// One control client connection: newline framing, in-order responses to pipelined requests,
// bounded buffering in both directions, an idle timeout, and the TCP auth gate.
#pragma once

#include <array>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>

#include "lib/control/commands.hh"

namespace ferry::control {

class Connection;

struct ConnectionLimits {
  // Responses queued but not yet taken by the kernel; at this many, reading pauses.
  std::size_t max_pending_requests = 64;
  // Past this much queued output (beyond a single response) the client is not reading: close.
  std::size_t max_pending_output_bytes = 1 << 20;
  std::chrono::milliseconds idle_timeout = std::chrono::minutes(5);
  // A TCP client has this long to send its auth line (control.tcp.auth_timeout_ms).
  std::chrono::milliseconds auth_timeout = std::chrono::seconds(3);
};

// The server as its connections see it. Connections hold it weakly: once the server is gone,
// their outstanding handlers only close their own socket.
class ConnectionHost {
 public:
  // Dispatches one request line and counts the outcome; returns the response line.
  virtual std::string handle_request(std::string_view line, const Peer& peer) = 0;
  // Checks a TCP connection's first line; counts and rate-limits failures per source. On success
  // the connection is an admin peer's from now on.
  virtual bool authenticate(std::string_view line, const Connection& connection) = 0;
  // A TCP connection that sent no auth line in time; it closes next.
  virtual void auth_timed_out(const Connection& connection) = 0;
  virtual void request_too_large(const Connection& connection) = 0;
  virtual void slow_reader(const Connection& connection) = 0;
  // Called once, before the socket closes, whatever the reason.
  virtual void connection_closed(Connection& connection) = 0;
  // True when `line` asks for the connection's socket itself (a handover): the host has taken
  // its own copy of `fd` and the connection closes without answering.
  virtual bool take_socket(std::string_view line, const Peer& peer, int fd) = 0;

 protected:
  ~ConnectionHost() = default;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Socket = boost::asio::generic::stream_protocol::socket;

  // `source` names the client in logs (and is the rate-limit key for TCP auth).
  Connection(Socket socket, const Peer& peer, bool needs_auth, std::string source,
             const ConnectionLimits& limits, std::weak_ptr<ConnectionHost> host);

  void start();
  // Closes at once, dropping unsent output. Idempotent.
  void close();

  const std::string& source() const { return source_; }
  const Peer& peer() const { return peer_; }

 private:
  using Clock = std::chrono::steady_clock;

  void start_read();
  void on_read(const boost::system::error_code& error, std::size_t bytes);
  void process_input();
  void handle_line(std::string_view line);
  void reject_too_large();
  void queue_response(std::string response);
  void start_write();
  void on_written(const boost::system::error_code& error);
  void finish_if_done();
  void arm_idle_timer();
  void on_idle_timer(const boost::system::error_code& error);
  Clock::duration current_timeout() const;
  bool backlogged() const { return output_.size() >= limits_.max_pending_requests; }

  Socket socket_;
  boost::asio::steady_timer idle_timer_;
  Peer peer_;
  bool awaiting_auth_;
  std::string source_;
  ConnectionLimits limits_;
  std::weak_ptr<ConnectionHost> host_;

  std::array<char, 16 * 1024> chunk_{};
  std::string input_;               // received bytes not yet taken as lines
  std::deque<std::string> output_;  // response lines, each with its newline; front is in flight
  std::size_t output_bytes_ = 0;
  Clock::time_point last_activity_;

  bool reading_ = false;
  bool writing_ = false;
  bool read_eof_ = false;           // the client half-closed: answer what it sent, then close
  bool close_after_flush_ = false;  // a fatal error response is queued: send it, then close
  bool closed_ = false;
};

}  // namespace ferry::control
