// A TCP echo service on the runtime: listening sockets, one multishot accept per worker, and per
// connection a task that receives through the worker's buffer ring and sends the received spans
// straight back (no copy), giving the buffers back only after the send completed.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/metrics/registry.hh"
#include "lib/runtime/recv_stream.hh"
#include "lib/runtime/runtime.hh"
#include "lib/tcp/tcp_service.hh"

namespace ferry::tcp {

// Per worker, written only by that worker.
struct alignas(64) EchoCounters {
  metrics::Counter accepted;
  metrics::Counter accept_errors;
  runtime::StreamCounters stream;  // released_bytes = bytes echoed; closed = connections ended
};

class EchoService final : public ListeningService,
                          public std::enable_shared_from_this<EchoService> {
 public:
  EchoService(std::string name, net::Endpoint configured, ListenerMode mode, std::uint32_t workers,
              bool multishot_accept, SessionTracker& sessions);
  ~EchoService() override;
  EchoService(const EchoService&) = delete;
  EchoService& operator=(const EchoService&) = delete;

  const std::string& name() const override { return name_; }
  std::string_view kind() const override { return "echo"; }
  // shutdown(2)s every connection of this service; their tasks end by themselves.
  void end_connections(runtime::Runtime& runtime) override;
  std::int64_t open_connections() const override;

  EchoCounters& counters(std::uint32_t worker) { return counters_[worker]; }
  SessionTracker& sessions() { return sessions_; }

  // ferry_tcp_connections_accepted_total, ferry_tcp_connections_open,
  // ferry_tcp_accept_errors_total, ferry_tcp_echo_bytes_total, each {service}.
  void collect(metrics::SnapshotBuilder& out) const override;

  void accepted(runtime::Worker& worker, UniqueFd connection) override;
  void accept_failed(runtime::Worker& worker, int error) override;

 private:
  const std::string name_;
  SessionTracker& sessions_;
  const std::uint32_t workers_;
  std::unique_ptr<EchoCounters[]> counters_;
};

// The connection task: receive, send the spans back, repeat; close on EOF or error.
runtime::Task echo_session(runtime::Worker& home, std::shared_ptr<EchoService> service,
                           UniqueFd fd);

}  // namespace ferry::tcp
