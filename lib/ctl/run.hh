// Runs one parsed ferryctl invocation: connect, ask, print, and turn the outcome into the
// documented exit code. main() only parses argv and wires up stdout, stderr and Ctrl-C.
#pragma once

#include <functional>
#include <ostream>

#include "lib/ctl/cli.hh"

namespace ferry::ctl {

struct Terminal {
  std::ostream& out;
  std::ostream& err;
  bool out_is_tty = false;                                      // watch redraws in place
  std::function<bool()> stop_requested = [] { return false; };  // Ctrl-C during watch
};

// Returns the process exit code (see ExitCode); never throws.
int run(const Invocation& invocation, Terminal& terminal);

}  // namespace ferry::ctl
