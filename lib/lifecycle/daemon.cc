// The daemon's lifecycle: bring every plane up, tell systemd, supervise (signals, watchdog,
// reload), and take the planes down in reverse order.
#include "lib/lifecycle/daemon.hh"

#include <fmt/format.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <future>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"
#include "lib/lifecycle/admin_part.hh"
#include "lib/lifecycle/daemon_state.hh"
#include "lib/metrics/process_metrics.hh"

namespace ferry::lifecycle {
namespace {

void arm_heartbeat(Daemon::State& s) {
  s.control_heartbeat->beat();
  s.heartbeat_timer.expires_after(kHeartbeatPeriod);
  s.heartbeat_timer.async_wait([&s](const boost::system::error_code& ec) {
    if (!ec) arm_heartbeat(s);
  });
}

// Every control client, proxied connection and XSK is a descriptor; 1024 is too few for them.
void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0)
      log::warning("raising RLIMIT_NOFILE: {}", std::strerror(errno));
  }
}

// A sigtimedwait() timeout.
timespec timespec_of(std::chrono::nanoseconds d) {
  return {static_cast<time_t>(d.count() / 1000000000), static_cast<long>(d.count() % 1000000000)};
}

// The binary on disk at the path this process was started from: after a package upgrade, the
// new one (readlink then says "(deleted)" for the old inode, which is stripped).
std::string own_binary() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  std::string path(buf, static_cast<std::size_t>(n));
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path;
}

// Signals are taken synchronously by the supervisor; every thread started from here inherits
// the mask, so none of them is interrupted by them.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

// What the daemon registers before any plane: its metrics, its commands, its upgrade's wake-up.
void register_daemon(Daemon::State& s) {
  auto start_seconds = std::chrono::duration<double>(s.started_at.time_since_epoch()).count();
  s.process_metrics = metrics::register_process_metrics(s.registry, FERRY_VERSION, start_seconds);
  s.daemon_metrics = s.registry.add([&s](metrics::SnapshotBuilder& out) { s.collect(out); });
  register_daemon_commands(s.commands, s);
  s.self_binary = own_binary();
  s.upgrade_wake = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
}

// Every plane up, afresh or taking over; false (the reason logged) when one could not start.
bool start_planes(Daemon::State& s) {
  try {
    if (!s.start_options.takeover_socket.empty()) {
      s.take_over(s.start_options.takeover_socket);
    } else {
      s.bring_up(nullptr);
    }
    return true;
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    log::error("ferryd could not start; everything set up so far is being released");
    s.planes.stop();
    return false;
  }
}

void start_control_thread(Daemon::State& s) {
  s.control_heartbeat = s.heartbeats.enroll("control", "control");
  s.work.emplace(s.io.get_executor());
  arm_heartbeat(s);
  s.control_thread = std::thread([&s] {
    pthread_setname_np(pthread_self(), "ferry-control");
    // A handler that throws loses only its own work (a request, a scrape, a timer's round):
    // the rest of the control plane serves on.
    while (run_guarded("control thread", [&s] { s.io.run(); }) && !s.io.stopped()) {
    }
  });
}

void reload_on_sighup(Daemon::State& s) {
  s.notifier.reloading();
  try {
    on_control_thread(s, [&s] { return s.reload("SIGHUP"); });
  } catch (const std::exception& e) {
    // Already logged by reload(); the running configuration stays.
  }
  s.notifier.ready(s.summary());
}

void upgrade_on_sigusr2(Daemon::State& s) {
  try {
    on_control_thread(s, [&s] { return s.start_upgrade("SIGUSR2"); });
  } catch (const std::exception& e) {
    log::error("upgrade (SIGUSR2): {}", e.what());
  }
}

// Pings systemd's watchdog while every thread shows progress, and withholds the ping (once
// saying why) while one does not, so that systemd restarts ferryd.
class WatchdogPinger {
 public:
  explicit WatchdogPinger(std::optional<std::chrono::milliseconds> interval)
      : interval_(interval) {}
  // How long the supervisor may wait for a signal between two looks.
  std::chrono::milliseconds tick() const {
    return std::min<std::chrono::milliseconds>(interval_.value_or(std::chrono::milliseconds(1000)),
                                               std::chrono::milliseconds(1000));
  }
  void look(Daemon::State& s) {
    if (!interval_ || std::chrono::steady_clock::now() < next_ping_) return;
    auto stalled = s.heartbeats.stalled(kStaleAfter);
    if (stalled.empty()) {
      s.notifier.watchdog();
      stall_reported_ = false;
    } else if (!stall_reported_) {
      log::error(
          "thread {} has not made progress for {} ms; withholding the watchdog ping so "
          "systemd restarts ferryd",
          stalled.front(), kStaleAfter.count());
      stall_reported_ = true;
    }
    next_ping_ = std::chrono::steady_clock::now() + *interval_;
  }

 private:
  std::optional<std::chrono::milliseconds> interval_;
  std::chrono::steady_clock::time_point next_ping_ = std::chrono::steady_clock::now();
  bool stall_reported_ = false;
};

// Until SIGTERM or SIGINT, or SIGUSR1 from the upgrade thread once the successor serves.
void supervise(Daemon::State& s, const sigset_t& signals) {
  WatchdogPinger watchdog(s.notifier.watchdog_interval());
  for (;;) {
    timespec timeout = timespec_of(watchdog.tick());
    int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) {
      log::notice("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      return;
    }
    if (sig == SIGUSR1 && s.handed_over.load()) return;  // from the upgrade thread: drain, exit
    if (sig == SIGUSR2) upgrade_on_sigusr2(s);
    if (sig == SIGHUP) reload_on_sighup(s);
    if (sig < 0 && errno != EAGAIN && errno != EINTR) {
      log::error("sigtimedwait: {}", std::strerror(errno));
    }
    watchdog.look(s);
  }
}

// The routers stop sending here before this host stops serving: every VIP is withdrawn, and the
// planes serve on for announce.withdraw_grace_ms while the routing daemons converge. A second
// SIGTERM or SIGINT cuts the wait short.
void withdraw_before_stopping(Daemon::State& s, const sigset_t& signals) {
  // The config is read on the control thread: a reload may be swapping it.
  auto [withdrawn, grace_ms] = on_control_thread(s, [&s] {
    std::size_t n = s.announce_plane.withdraw_all();
    return std::pair<std::size_t, std::uint32_t>(
        n, s.config->announce ? s.config->announce->withdraw_grace_ms : 0);
  });
  if (withdrawn == 0 || grace_ms == 0) return;
  log::notice("announce: {} VIP(s) withdrawn; serving on for {} ms while the routers converge",
              withdrawn, grace_ms);
  s.notifier.status(fmt::format("stopping: VIPs withdrawn, serving on for {} ms", grace_ms));
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  for (auto now = std::chrono::steady_clock::now(); now < until;
       now = std::chrono::steady_clock::now()) {
    timespec timeout = timespec_of(until - now);
    int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) {
      log::notice("received a second stop signal; stopping without waiting out the grace");
      return;
    }
  }
}

// The upgrade's conversation ends, the control thread runs dry, and the planes go in reverse.
void shut_down(Daemon::State& s) {
  s.stop_upgrade();
  if (s.upgrade_thread.joinable()) s.upgrade_thread.join();
  boost::asio::post(s.io, [&s] {
    s.heartbeat_timer.cancel();
    s.work.reset();
    s.io.stop();
  });
  s.control_thread.join();
  s.control_heartbeat.reset();
  // TCP (listeners, connections, io_uring workers), the announcer (its routes already withdrawn
  // or handed over), the fast path (workers joined, XSKMAP emptied, sockets and UMEM gone), the
  // XDP program (detached and unloaded), the health checker, metrics, control.
  s.planes.stop();
  s.daemon_metrics.reset();
  s.process_metrics.reset();
}

}  // namespace

Daemon::State::State(std::string path, config::Config initial)
    : config_path(std::move(path)),
      config(std::make_shared<const config::Config>(std::move(initial))),
      policy(geteuid()) {}

Daemon::Daemon(std::string config_path, config::Config config)
    : state_(std::make_unique<State>(std::move(config_path), std::move(config))) {}

Daemon::~Daemon() = default;

void Daemon::set_start_options(std::string log_level, std::string takeover_socket) {
  state_->start_options = StartOptions{std::move(log_level), std::move(takeover_socket)};
}

void Daemon::State::bring_up(handover::Offer* offer,
                             const std::function<handover::Offer()>& await_pause) {
  admin.configure(config->services);
  if (offer) take_admin(admin, offer->take_part("admin"));
  planes.start(admin::effective_config(*config, admin), offer);
  std::optional<handover::Offer> paused;
  try {
    if (await_pause) paused = await_pause();
    planes.serve(paused ? &*paused : nullptr);
  } catch (...) {
    if (offer) planes.release();  // what the running ferryd serves stays as it is
    planes.stop();
    throw;
  }
}

int Daemon::run() {
  State& s = *state_;
  const sigset_t signals = block_signals();
  raise_fd_limit();
  register_daemon(s);
  if (!start_planes(s)) return 1;
  start_control_thread(s);

  std::string summary = s.summary();
  log::notice("ferryd {} ready: {}", FERRY_VERSION, summary);
  s.notifier.ready(summary);
  supervise(s, signals);

  const bool handed_over = s.handed_over.load();
  if (handed_over) {
    // The successor serves and systemd follows it; the open connections here drain.
    // Echo connections close at once; proxied ones finish within the drain timeout.
    tcp::TcpPlane* tcp = s.tcp_plane.plane();
    std::int64_t proxied = tcp ? tcp->status()["proxy"].value("connections", 0) : 0;
    log::notice("handed over: draining {} proxied TCP connection(s) for up to {} ms", proxied,
                s.config->tcp.proxy.drain_timeout_ms);
  } else {
    s.notifier.stopping();
    withdraw_before_stopping(s, signals);
  }
  shut_down(s);
  log::notice("ferryd stopped{}", handed_over ? " after handing over" : "");
  return fatal_stop_status();
}

}  // namespace ferry::lifecycle
