// `ferryctl upgrade` (see upgrade.hh).
#include "lib/ctl/upgrade.hh"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "lib/ctl/error.hh"

namespace ferry::ctl {
namespace {

using nlohmann::json;

// A handover loads a program and maps the UMEM before the pause; a minute covers slow hosts.
constexpr auto kUpgradeWait = std::chrono::seconds(60);
constexpr auto kPollInterval = std::chrono::milliseconds(50);

}  // namespace

int run_upgrade(Client& client, const Invocation& inv, Terminal& term) {
  Response started = client.call("upgrade");
  if (!started.ok) {
    term.err << "ferryctl: upgrade failed: " << started.error_message << "\n";
    return 1;
  }
  const int old_pid = started.result.value("old_pid", 0);
  const int new_pid = started.result.value("new_pid", 0);
  auto deadline = std::chrono::steady_clock::now() + kUpgradeWait;
  std::string last_problem = "no answer";
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kPollInterval);
    // A new connection each time: whichever process accepts it answers.
    try {
      Client probe = Client::connect(inv.socket_path, inv.timeout_ms);
      Response status = probe.call("status");
      if (!status.ok) {
        last_problem = status.error_message;
        continue;
      }
      const json& r = status.result;
      const int pid = r.value("pid", 0);
      const json handover = r.value("handover", json());
      const json upgrade = r.value("upgrade", json());
      if (pid == new_pid && handover.is_object() && handover.value("from_pid", 0) == old_pid) {
        const double pause_us = handover.value("pause_us", 0.0);
        const double took_ms = handover.value("took_ms", 0.0);
        if (inv.json) {
          term.out << json{{"old_pid", old_pid},
                           {"new_pid", new_pid},
                           {"pause_us", pause_us},
                           {"took_ms", took_ms},
                           {"flows_carried", handover.value("flows_carried", 0)}}
                          .dump(2)
                   << "\n";
        } else {
          term.out << fmt::format(
              "upgrade: ferryd {} handed over to {} in {:.1f} ms (fast path paused {:.0f} us)\n",
              old_pid, new_pid, took_ms, pause_us);
        }
        return 0;
      }
      if (pid == old_pid && upgrade.is_object() && upgrade.value("state", "") == "failed" &&
          upgrade.value("new_pid", json()) == json(new_pid)) {
        term.err << "ferryctl: upgrade failed: " << upgrade.value("error", std::string("?"))
                 << "\nferryctl: ferryd " << old_pid << " serves on\n";
        return 1;
      }
      last_problem = fmt::format("pid {} answers, upgrade {}", pid, upgrade.value("state", "?"));
    } catch (const CtlError& e) {
      last_problem = e.what();  // between the two processes, or the socket is briefly busy
    }
  }
  term.err << "ferryctl: upgrade to pid " << new_pid << " did not finish within "
           << kUpgradeWait.count() << " s (" << last_problem << ")\n";
  return 1;
}

}  // namespace ferry::ctl
