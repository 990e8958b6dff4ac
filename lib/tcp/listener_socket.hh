// Listening TCP sockets for services: one per worker bound with SO_REUSEPORT (the kernel spreads
// connections by flow hash), or one shared by every worker; and reading back the bound address
// (port 0 in tests).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "lib/common/env.hh"
#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"

namespace ferry::tcp {

enum class ListenerMode {
  reuseport,  // one listening socket per worker, SO_REUSEPORT group (default)
  shared,     // one listening socket; every worker arms an accept on it
};
std::string_view to_string(ListenerMode mode);
// FERRY_TCP_LISTENER=shared|reuseport over `configured`; anything else throws
// std::invalid_argument. `lookup` is getenv by default.
ListenerMode listener_mode_with_env(ListenerMode configured, EnvLookup lookup = nullptr);

// Non-blocking, close-on-exec, SO_REUSEADDR (and SO_REUSEPORT when asked), bound and listening.
// Throws std::system_error whose what() names the address and what to check.
UniqueFd open_listener(const net::Endpoint& at, bool reuseport, int backlog = 4096);

// `count` sockets for one service: all bound to `at` with SO_REUSEPORT when reuseport, else one.
// Port 0 binds the first socket to a free port and the rest to the same one.
std::vector<UniqueFd> open_listeners(const net::Endpoint& at, ListenerMode mode,
                                     std::uint32_t count);

// The address a socket is bound to.
net::Endpoint bound_endpoint(int fd);

}  // namespace ferry::tcp
