// sd_notify(3) for Type=notify: READY, STATUS, WATCHDOG and STOPPING. Silent outside systemd.
#include "lib/lifecycle/systemd_notifier.hh"

#include <systemd/sd-daemon.h>

#include <cstdlib>

#include "lib/common/log.hh"

namespace ferry::lifecycle {

SystemdNotifier::SystemdNotifier() {
  active_ = std::getenv("NOTIFY_SOCKET") != nullptr;
  std::uint64_t usec = 0;
  // unset_environment=0: the variables stay for nothing else to see, but we never fork.
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_interval_ = std::chrono::milliseconds(usec / 2000);
  }
}

void SystemdNotifier::send(const std::string& state) const {
  if (!active_) return;
  int r = sd_notify(0, state.c_str());
  if (r < 0) log::warning("sd_notify({}) failed: {}", state.substr(0, state.find('\n')), r);
}

void SystemdNotifier::ready(const std::string& status) const { send("READY=1\nSTATUS=" + status); }
void SystemdNotifier::status(const std::string& status) const { send("STATUS=" + status); }
void SystemdNotifier::watchdog() const { send("WATCHDOG=1"); }
void SystemdNotifier::reloading() const { send("RELOADING=1"); }
void SystemdNotifier::main_pid(int pid, const std::string& status) const {
  send("MAINPID=" + std::to_string(pid) + "\nSTATUS=" + status);
}
void SystemdNotifier::stopping() const { send("STOPPING=1\nSTATUS=stopping"); }

}  // namespace ferry::lifecycle
