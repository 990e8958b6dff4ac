// A service's listening sockets on the runtime: one per worker (SO_REUSEPORT) or one shared, each
// worker with its own multishot accept, handing every accepted socket to the service's sink.
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
#include "lib/runtime/runtime.hh"
#include "lib/tcp/listener_socket.hh"

namespace ferry::tcp {

// What a service does with its accepts; called on the accepting worker.
class AcceptSink {
 public:
  virtual void accepted(runtime::Worker& worker, UniqueFd connection) = 0;
  // A failed accept (not a cancel): `error` is the positive errno.
  virtual void accept_failed(runtime::Worker& worker, int error) = 0;

 protected:
  ~AcceptSink() = default;
};

class ListenerGroup {
 public:
  ListenerGroup(net::Endpoint configured, ListenerMode mode, std::uint32_t workers,
                bool multishot_accept, AcceptSink& sink);
  ~ListenerGroup();
  ListenerGroup(const ListenerGroup&) = delete;
  ListenerGroup& operator=(const ListenerGroup&) = delete;

  // Control thread. Opens the sockets (throws std::system_error) and has every worker arm its
  // accept; the sink gets connections from then on. `inherited` are listening sockets a previous
  // ferryd handed over for this address: they are used as they are (their accept queues and
  // SO_REUSEPORT group were never closed), and only the missing ones are opened.
  void listen(runtime::Runtime& runtime, std::vector<UniqueFd> inherited = {});
  // The listening sockets, while listening (a handover passes them on).
  std::vector<int> fds() const;
  // Control thread. Cancels the accepts and closes the sockets; true when every worker confirmed
  // within `timeout` (else this object must live until the runtime stops).
  bool close(runtime::Runtime& runtime, std::chrono::milliseconds timeout);

  const net::Endpoint& configured() const { return configured_; }
  const net::Endpoint& bound() const { return bound_; }  // valid after listen()

 private:
  class Acceptor;
  void acceptor_closed();

  const net::Endpoint configured_;
  net::Endpoint bound_;
  const ListenerMode mode_;
  const bool multishot_;
  const std::uint32_t workers_;
  AcceptSink& sink_;
  std::vector<std::unique_ptr<Acceptor>> acceptors_;  // one per worker
  UniqueFd shared_fd_;                                // ListenerMode::shared

  std::mutex close_mutex_;
  std::condition_variable close_cv_;
  std::uint32_t closed_acceptors_ = 0;  // guarded by close_mutex_
  // close() gave up waiting: the service has ended its connections without these accepts, so
  // a connection they still take is closed, not handed to it.
  std::atomic<bool> abandoned_{false};
};

}  // namespace ferry::tcp
