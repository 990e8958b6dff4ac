// How a ferryctl invocation ends: the exit codes scripts rely on (see docs/ferryctl.md) and the
// error that carries one from wherever it arose up to main.
#pragma once

#include <stdexcept>
#include <string>

namespace ferry::ctl {

enum class ExitCode : int {
  ok = 0,
  daemon_error = 1,       // ferryd answered {"ok":false,...}
  usage = 2,              // bad command line
  not_running = 3,        // no socket, or nobody listening on it
  permission_denied = 4,  // the socket refused us, or ferryd refused the command
  timeout = 5,            // no answer within --timeout-ms, or an answer that breaks the protocol
};

// The message is printed after "ferryctl: "; it must say what happened and what to do.
class CtlError : public std::runtime_error {
 public:
  CtlError(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode exit_code() const { return code_; }

 private:
  ExitCode code_;
};

}  // namespace ferry::ctl
