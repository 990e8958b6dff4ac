// `ferryctl upgrade`: asks ferryd to hand over to the binary on disk and follows the handover
// until the new process answers on the control socket, or the running one says why it failed.
#pragma once

#include "lib/ctl/cli.hh"
#include "lib/ctl/client.hh"
#include "lib/ctl/run.hh"

namespace ferry::ctl {

// The exit code: 0 handed over, 1 failed (the running ferryd serves on) or timed out.
int run_upgrade(Client& client, const Invocation& inv, Terminal& term);

}  // namespace ferry::ctl
