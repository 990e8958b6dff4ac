// What the TCP plane runs: a service on the runtime (echo or proxy) with its listeners, its
// connections and its metrics, and the count of connections of every service stop() waits for.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "lib/common/net.hh"
#include "lib/metrics/registry.hh"
#include "lib/runtime/runtime.hh"
#include "lib/tcp/listener_group.hh"

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

class TcpService {
 public:
  virtual ~TcpService() = default;

  virtual const std::string& name() const = 0;
  virtual std::string_view kind() const = 0;  // "echo" | "proxy"
  virtual const net::Endpoint& configured() const = 0;
  virtual const net::Endpoint& bound() const = 0;  // valid after listen()

  // Control thread. Opens the listening sockets (throws std::system_error), or takes the ones a
  // previous ferryd handed over, and starts accepting.
  virtual void listen(runtime::Runtime& runtime, std::vector<UniqueFd> inherited) = 0;
  // The listening sockets while listening, for a handover.
  virtual std::vector<int> listening_fds() const = 0;
  // Control thread. Stops accepting and closes the sockets; true when every worker confirmed
  // within `timeout` (else the service must be kept alive until the runtime stops).
  virtual bool close_listeners(runtime::Runtime& runtime, std::chrono::milliseconds timeout) = 0;
  // Control thread, after close_listeners(). Ends the open connections the way the service
  // wants (echo: at once; proxy: after its drain grace, then reset). Does not wait.
  virtual void end_connections(runtime::Runtime& runtime) = 0;
  // Connections of this service still open.
  virtual std::int64_t open_connections() const = 0;

  virtual void collect(metrics::SnapshotBuilder& out) const = 0;
  // Per-service state for `ferryctl services` (null when there is nothing to add).
  virtual nlohmann::json status() const { return nullptr; }
};

// A service whose connections come from its own ListenerGroup (every TCP service today).
class ListeningService : public TcpService, public AcceptSink {
 public:
  ListeningService(net::Endpoint configured, ListenerMode mode, std::uint32_t workers,
                   bool multishot_accept)
      : listeners_(configured, mode, workers, multishot_accept, *this) {}

  const net::Endpoint& configured() const override { return listeners_.configured(); }
  const net::Endpoint& bound() const override { return listeners_.bound(); }
  void listen(runtime::Runtime& runtime, std::vector<UniqueFd> inherited) override {
    listeners_.listen(runtime, std::move(inherited));
  }
  std::vector<int> listening_fds() const override { return listeners_.fds(); }
  bool close_listeners(runtime::Runtime& runtime, std::chrono::milliseconds timeout) override {
    return listeners_.close(runtime, timeout);
  }

 private:
  ListenerGroup listeners_;
};

}  // namespace ferry::tcp
