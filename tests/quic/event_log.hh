// The test server's log: one JSON object a line on stdout, flushed at once, so a test can follow
// connections while the server runs.
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>

namespace ferry::quic_test {

inline void log_event(const nlohmann::json& event) {
  // A client's bytes (a request path) need not be UTF-8: replaced, never thrown on.
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace ferry::quic_test
