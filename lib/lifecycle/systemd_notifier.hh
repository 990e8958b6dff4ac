// sd_notify(3) for Type=notify: READY, STATUS, WATCHDOG and STOPPING. Silent outside systemd.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace ferry::lifecycle {

class SystemdNotifier {
 public:
  SystemdNotifier();
  bool active() const { return active_; }
  // The interval to ping at (half of WATCHDOG_USEC), when the unit has a watchdog for us.
  std::optional<std::chrono::milliseconds> watchdog_interval() const { return watchdog_interval_; }

  void ready(const std::string& status) const;
  void status(const std::string& status) const;
  void watchdog() const;
  void reloading() const;
  void stopping() const;
  // A handover: the service's main process is `pid` from now on (so its notifications count).
  void main_pid(int pid, const std::string& status) const;

 private:
  void send(const std::string& state) const;
  bool active_ = false;
  std::optional<std::chrono::milliseconds> watchdog_interval_;
};

}  // namespace ferry::lifecycle
