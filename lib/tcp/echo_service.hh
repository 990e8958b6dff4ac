// A TCP echo service on the runtime: listening sockets, one multishot accept per worker, and per
// connection a task that receives through the worker's buffer ring and sends the received spans
// straight back (no copy), giving the buffers back only after the send completed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/metrics/registry.hh"
#include "lib/runtime/completion.hh"
#include "lib/runtime/recv_stream.hh"
#include "lib/runtime/runtime.hh"
#include "lib/tcp/listener_socket.hh"

namespace ferry::tcp {

// Connections of every service of a plane that have not ended yet; stop() waits on it.
class SessionTracker {
 public:
  void started() { live_.fetch_add(1, std::memory_order_relaxed); }
  void ended();
  std::int64_t live() const { return live_.load(std::memory_order_relaxed); }
  // False when the deadline passed with sessions still alive.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  std::atomic<std::int64_t> live_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
};

// Per worker, written only by that worker.
struct alignas(64) EchoCounters {
  metrics::Counter accepted;
  metrics::Counter accept_errors;
  runtime::StreamCounters stream;  // released_bytes = bytes echoed; closed = connections ended
};

class EchoService : public std::enable_shared_from_this<EchoService> {
 public:
  EchoService(std::string name, net::Endpoint configured, ListenerMode mode, std::uint32_t workers,
              bool multishot_accept, SessionTracker& sessions);
  ~EchoService();
  EchoService(const EchoService&) = delete;
  EchoService& operator=(const EchoService&) = delete;

  // Control thread. Opens the listening sockets (throws std::system_error) and has every worker
  // arm its accept. Connections are accepted from then on.
  void listen(runtime::Runtime& runtime);
  // Control thread. Cancels the accepts and closes the sockets; true when every worker confirmed
  // within `timeout` (else the service must be kept alive until the runtime stops).
  bool close_listeners(runtime::Runtime& runtime, std::chrono::milliseconds timeout);
  // Control thread. shutdown(2)s every connection of this service; their tasks end by themselves.
  void shutdown_connections(runtime::Runtime& runtime);

  const std::string& name() const { return name_; }
  const net::Endpoint& configured() const { return configured_; }
  const net::Endpoint& bound() const { return bound_; }  // valid after listen()
  EchoCounters& counters(std::uint32_t worker) { return counters_[worker]; }
  SessionTracker& sessions() { return sessions_; }

  // ferry_tcp_connections_accepted_total, ferry_tcp_connections_open,
  // ferry_tcp_accept_errors_total, ferry_tcp_echo_bytes_total, each {service}.
  void collect(metrics::SnapshotBuilder& out) const;

 private:
  class Acceptor;
  void acceptor_closed();

  const std::string name_;
  const net::Endpoint configured_;
  net::Endpoint bound_;
  const ListenerMode mode_;
  const bool multishot_;
  SessionTracker& sessions_;
  std::unique_ptr<EchoCounters[]> counters_;
  const std::uint32_t workers_;
  std::vector<std::unique_ptr<Acceptor>> acceptors_;  // one per worker
  UniqueFd shared_fd_;                                // ListenerMode::shared

  std::mutex close_mutex_;
  std::condition_variable close_cv_;
  std::uint32_t closed_acceptors_ = 0;  // guarded by close_mutex_
};

// The connection task: receive, send the spans back, repeat; close on EOF or error.
runtime::Task echo_session(runtime::Worker& home, std::shared_ptr<EchoService> service,
                           UniqueFd fd);

}  // namespace ferry::tcp
