// The ferryctl side of the control protocol: one Unix stream connection to ferryd, one JSON
// request per line, answers matched to requests by id, every wait bounded by a timeout.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "lib/common/unique_fd.hh"
#include "lib/ctl/error.hh"

namespace ferry::ctl {

inline constexpr std::string_view kDefaultSocketPath = "/run/ferry/ferryd.sock";

// One well-formed response line.
struct Response {
  nlohmann::json raw;  // the whole response object as received
  bool ok = false;
  nlohmann::json result;   // when ok
  std::string error_code;  // when !ok
  std::string error_message;
};

class Client {
 public:
  // Connects to ferryd's socket. timeout_ms bounds the connect (a full listen backlog) and each
  // call(); 0 waits forever. Throws CtlError with exit code 3, 4 or 5 (see connect_failure()).
  static Client connect(const std::string& socket_path, int timeout_ms);

  // Adopts a connected stream socket (tests hand in one end of a socketpair).
  Client(UniqueFd fd, int timeout_ms);

  // Sends {"id":N,"cmd":cmd,"args":args} and waits for the response carrying id N (or a null
  // id, which ferryd uses when it could not even read our id). Daemon errors are returned, not
  // thrown; no answer in time, a closed connection or a malformed line throw CtlError (exit 5).
  Response call(std::string_view cmd, const nlohmann::json& args = nlohmann::json::object());

  int fd() const { return fd_.get(); }

 private:
  void send_all(std::string_view data, std::string_view cmd);
  std::string read_line(std::string_view cmd);

  UniqueFd fd_;
  int timeout_ms_;
  std::uint64_t next_id_ = 1;
  std::string buffered_;          // bytes received past the last line handed out
  std::int64_t deadline_ns_ = 0;  // steady clock; meaningful only while a call runs
};

// Parses and checks one response line; throws CtlError (exit 5) if it is not the protocol.
Response parse_response(std::string_view line);

// The result of an ok response, or CtlError carrying daemon_error_exit_code() otherwise.
const nlohmann::json& expect_ok(const Response& response);

// connect(2) errno -> exit code: ENOENT, ECONNREFUSED (and other "nobody there") -> 3,
// EACCES/EPERM -> 4, EAGAIN/ETIMEDOUT (backlog full past the timeout) -> 5.
ExitCode connect_errno_exit_code(int err);

// The operator-facing message for a failed connect, e.g. "cannot connect to /run/ferry/ferryd.sock:
// ferryd is not running (No such file or directory)". `socket_group` names the group to join on
// EACCES.
std::string connect_failure_message(std::string_view socket_path, int err,
                                    std::string_view socket_group);

// Both together, as connect() throws it.
CtlError connect_failure(std::string_view socket_path, int err, std::string_view socket_group);

// permission_denied and unauthorized -> 4; every other daemon error code -> 1.
ExitCode daemon_error_exit_code(std::string_view code);

}  // namespace ferry::ctl
