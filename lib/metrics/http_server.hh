// The Prometheus scrape endpoint: GET /metrics over HTTP/1.x on the control thread's io_context.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstddef>
#include <memory>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "lib/metrics/registry.hh"

namespace ferry::metrics {

// Limits that keep slow or numerous scrapers from holding the control thread's resources, and
// one client address from taking the connections another's scrape needs (config.hh has the
// operator's keys: metrics.max_connections, .max_connections_per_source, .request_timeout_ms).
struct MetricsHttpServerOptions {
  std::chrono::milliseconds request_timeout{3'000};  // to receive one whole request head
  std::chrono::milliseconds write_timeout{10'000};   // to send one batch of responses
  std::size_t max_connections = 256;                 // further ones are closed at accept
  std::size_t max_connections_per_source = 8;        // open at once from one client address
};

class MetricsHttpServer {
 public:
  // Registers the server's own counters (ferry_metrics_http_*) into `registry`, which must
  // outlive the server.
  MetricsHttpServer(boost::asio::io_context& io, const net::Endpoint& listen, Registry& registry,
                    MetricsHttpServerOptions options = {});
  ~MetricsHttpServer();  // stop()s
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds and listens; throws std::runtime_error naming the address on failure.
  void start();
  // A handover, new side, before start(): serve on the predecessor's listening socket.
  void inherit(UniqueFd listening);
  // A handover, old side: the listening socket (-1 when not listening), and no more accepts.
  int listening_fd() const;
  void stop_accepting();
  // Closes the listener and every connection. Call on the io_context's thread (or while it is
  // not running), like everything else here.
  void stop();
  // The bound endpoint (useful with port 0 in tests).
  net::Endpoint local_endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::metrics
