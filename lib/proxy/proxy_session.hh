// One proxied connection: the client's socket, the backend chosen and connected (with retries),
// and the two forwarding tasks (client -> backend, backend -> client) that share it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "lib/common/unique_fd.hh"
#include "lib/proxy/proxy_service.hh"
#include "lib/runtime/runtime.hh"

namespace ferry::proxy {

// Shared by the connect task and the two forwarding tasks; freed by the last of them to end.
struct Session {
  Session(runtime::Worker& home_worker, std::shared_ptr<ProxyService> owner,
          std::shared_ptr<const Generation> gen, UniqueFd client_fd);

  // Resets both sides (once): RST to the client and the backend, both directions wake and end.
  // Any thread; the sweep calls it under the registry lock, the tasks while they hold the fds.
  void abort();
  void touch();  // a batch went through: not idle
  bool was_reset() const { return reset.load(std::memory_order_acquire); }

  runtime::Worker& home;  // the worker whose buffer ring receives both sockets
  std::shared_ptr<ProxyService> service;
  std::shared_ptr<const Generation> generation;
  UniqueFd client;
  UniqueFd backend;
  const Backend* target = nullptr;  // in generation's pool, once connected
  std::atomic<std::int64_t> last_active_ms{0};
  std::atomic<bool> reset{false};
  std::atomic<int> directions{0};  // forwarding tasks still running
  // The service's registry (guarded by its lock).
  Session* prev = nullptr;
  Session* next = nullptr;
  int backend_fd = -1;  // the socket the sweep aborts while connecting, then the connected one
};

// How long a client of a service with accept_proxy_protocol has, from the accept, to deliver its
// whole PROXY protocol header: the specification asks for at least 3 s (a TCP retransmit).
inline constexpr std::uint32_t kHeaderTimeoutMs = 3000;

// The connection task spawned at accept: connects (trying up to connect_attempts healthy
// backends), then spawns the two forwarding tasks; on failure resets the client. With the
// service's PROXY protocol settings it first reads the client's header, and writes one to the
// backend before any client byte.
runtime::Task proxy_session(runtime::Worker& home, std::shared_ptr<ProxyService> service,
                            std::shared_ptr<const Generation> generation, UniqueFd client);

std::int64_t steady_now_ms();

}  // namespace ferry::proxy
