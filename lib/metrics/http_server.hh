// The Prometheus scrape endpoint: GET /metrics over HTTP/1.x on the control thread's io_context.
#pragma once

#include <memory>

#include <boost/asio/io_context.hpp>

#include "lib/common/net.hh"
#include "lib/metrics/registry.hh"

namespace ferry::metrics {

class MetricsHttpServer {
 public:
  MetricsHttpServer(boost::asio::io_context& io, const net::Endpoint& listen, Registry& registry);
  ~MetricsHttpServer();  // stop()s
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // Binds and listens; throws std::runtime_error naming the address on failure.
  void start();
  void stop();
  // The bound endpoint (useful with port 0 in tests).
  net::Endpoint local_endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::metrics
