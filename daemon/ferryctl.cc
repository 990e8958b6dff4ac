// ferryctl: the operator's command-line client for ferryd's control socket. Parses argv and
// wires stdout, stderr and Ctrl-C; everything else lives in lib/ctl.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "lib/ctl/cli.hh"
#include "lib/ctl/error.hh"
#include "lib/ctl/run.hh"

namespace {

volatile sig_atomic_t g_stop = 0;

void request_stop(int) {
  g_stop = 1;
}

// Without SA_RESTART, so Ctrl-C also cuts short the sleep between watch snapshots.
void stop_on_ctrl_c() {
  struct sigaction action {};
  action.sa_handler = request_stop;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ferry::ctl::Invocation invocation;
  try {
    invocation = ferry::ctl::parse_command_line(args, std::getenv("FERRY_SOCKET"));
  } catch (const ferry::ctl::CtlError& e) {
    std::cerr << "ferryctl: " << e.what() << "\n";
    return static_cast<int>(e.exit_code());
  }
  if (invocation.command == ferry::ctl::Command::watch) stop_on_ctrl_c();

  ferry::ctl::Terminal terminal{std::cout, std::cerr};
  terminal.out_is_tty = ::isatty(STDOUT_FILENO) == 1;
  terminal.stop_requested = [] { return g_stop != 0; };
  return ferry::ctl::run(invocation, terminal);
}
