// Who listens on a TCP address, for the error of a bind that found it taken.
#pragma once

#include <string>

#include "lib/common/net.hh"

namespace ferry::net {

// "nginx, pid 1234" for the process whose listening TCP socket holds `at` (the same address,
// or the wildcard, and port), from /proc/net/tcp{,6} and /proc/*/fd; "" when it cannot tell
// (another network namespace, no permission to look at the process).
std::string tcp_listener_of(const Endpoint& at);

}  // namespace ferry::net
