// ferryctl's command line: what the operator asked for, parsed and checked before any
// connection is made, and the --help text that documents it (with the exit codes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::ctl {

enum class Command {
  status,
  stats,
  services,
  workers,
  config,
  reload,
  upgrade,
  backend,
  announce,
  watch,
  top,
  help,
  usage,
  version
};

struct Invocation {
  Command command = Command::usage;
  std::string socket_path;  // --socket, else $FERRY_SOCKET, else kDefaultSocketPath
  bool json = false;
  int timeout_ms = 5000;  // 0 = wait forever
  std::string prefix;     // stats and watch: sent to ferryd, the common start of `prefixes`
  std::vector<std::string> prefixes;  // stats and watch: every PREFIX argument
  int interval_ms = 1000;             // watch, top
  int count = 0;                      // watch, top: frames to show, 0 = until Ctrl-C
  bool backends = false;              // top --backends
  bool reasons = false;               // top --reasons
  bool sort_by_name = false;          // top --sort name (else busiest first)
  nlohmann::json args;                // backend: the command's args, checked here
};

// `args` excludes argv[0]. Options may come before or after the command, as "--opt value" or
// "--opt=value". `env_socket` is $FERRY_SOCKET (null or empty when unset). Throws CtlError with
// ExitCode::usage and a message that says what was wrong.
Invocation parse_command_line(const std::vector<std::string>& args, const char* env_socket);

// The control command sent for `command` ("status", ...); empty for the local ones.
std::string_view wire_command(Command command);

std::string usage_text();

}  // namespace ferry::ctl
