// The daemon's lifecycle: bring every configured part up, tell systemd, supervise (signals,
// watchdog, reload), and tear everything down in reverse order.
#include "lib/lifecycle/daemon.hh"

#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <future>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
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

// Runs `fn` on the control thread and waits for it; exceptions come back to the caller.
template <typename Fn>
auto on_control_thread(Daemon::State& s, Fn fn) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto result = task.get_future();
  boost::asio::post(s.io, [&task] { task(); });
  return result.get();
}

// Every control client, proxied connection and XSK is a descriptor; 1024 is too few for them.
void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) log::warning("raising RLIMIT_NOFILE: {}", std::strerror(errno));
  }
}

// A sigtimedwait() timeout.
timespec timespec_of(std::chrono::nanoseconds d) {
  return {static_cast<time_t>(d.count() / 1000000000), static_cast<long>(d.count() % 1000000000)};
}

// The routers stop sending here before this host stops serving: every VIP is withdrawn, and the
// planes serve on for announce.withdraw_grace_ms while the routing daemons converge. A second
// SIGTERM or SIGINT cuts the wait short.
void withdraw_before_stopping(Daemon::State& s, const sigset_t& signals) {
  // The config is read on the control thread: a reload may be swapping it.
  auto [withdrawn, grace_ms] = on_control_thread(s, [&s] {
    std::size_t n = s.withdraw_announcements();
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

}  // namespace

Daemon::State::State(std::string path, config::Config initial)
    : config_path(std::move(path)),
      config(std::make_shared<const config::Config>(std::move(initial))),
      policy(geteuid()) {}

Daemon::Daemon(std::string config_path, config::Config config)
    : state_(std::make_unique<State>(std::move(config_path), std::move(config))) {}

Daemon::~Daemon() = default;

int Daemon::run() {
  State& s = *state_;
  // Signals are taken synchronously by this (supervisor) thread; every thread started from here
  // inherits the mask, so none of them is interrupted by them.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();

  auto start_seconds = std::chrono::duration<double>(s.started_at.time_since_epoch()).count();
  s.process_metrics = metrics::register_process_metrics(s.registry, FERRY_VERSION, start_seconds);
  s.daemon_metrics = s.registry.add([&s](metrics::SnapshotBuilder& out) { s.collect(out); });
  s.register_commands();

  try {
    // The control socket first: a second daemon on the same config stops here, before it can
    // touch the first one's interfaces.
    s.control = std::make_unique<control::ControlServer>(s.io, s.config->control, s.commands,
                                                         s.policy, s.registry);
    s.control->start();
    if (s.config->metrics.listen) {
      s.metrics_http = std::make_unique<metrics::MetricsHttpServer>(s.io, *s.config->metrics.listen,
                                                                     s.registry);
      s.metrics_http->start();
    }
    s.xdp = std::make_unique<xdp::XdpPlane>(s.registry);
    s.admin.configure(s.config->services);
    s.apply_data_plane(*s.config);
    s.tcp = std::make_unique<tcp::TcpPlane>(
        s.registry,
        [&s](const std::string& worker) {
          std::shared_ptr<Heartbeat> beat = s.heartbeats.enroll(worker, "tcp");
          return std::function<void()>([beat] { beat->beat(); });
        },
        &s.health);
    s.tcp->start(admin::effective_config(*s.config, s.admin));
    // Every plane serves: the VIPs may attract traffic now (on the control thread, once it runs).
    s.announcing = true;
    boost::asio::post(s.io, [&s] { s.refresh_announcements(); });
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    log::error("ferryd could not start; everything set up so far is being released");
    s.tcp.reset();
    s.announcer.reset();
    s.link_watch.reset();
    s.fastpath.reset();
    s.xdp.reset();
    s.metrics_http.reset();
    s.control.reset();
    return 1;
  }

  s.control_heartbeat = s.heartbeats.enroll("control", "control");
  s.work.emplace(s.io.get_executor());
  arm_heartbeat(s);
  s.control_thread = std::thread([&s] {
    pthread_setname_np(pthread_self(), "ferry-control");
    s.io.run();
  });

  std::string summary = s.summary();
  log::notice("ferryd {} ready: {}", FERRY_VERSION, summary);
  s.notifier.ready(summary);

  auto watchdog = s.notifier.watchdog_interval();
  auto tick = std::min<std::chrono::milliseconds>(watchdog.value_or(std::chrono::milliseconds(1000)),
                                                  std::chrono::milliseconds(1000));
  auto next_ping = std::chrono::steady_clock::now();
  bool stall_reported = false;
  for (;;) {
    timespec timeout = timespec_of(tick);
    int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) {
      log::notice("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (sig == SIGHUP) {
      s.notifier.reloading();
      try {
        on_control_thread(s, [&s] { return s.reload("SIGHUP"); });
      } catch (const std::exception& e) {
        // Already logged by reload(); the running configuration stays.
      }
      s.notifier.ready(s.summary());
    }
    if (sig < 0 && errno != EAGAIN && errno != EINTR) {
      log::error("sigtimedwait: {}", std::strerror(errno));
    }
    if (watchdog && std::chrono::steady_clock::now() >= next_ping) {
      auto stalled = s.heartbeats.stalled(kStaleAfter);
      if (stalled.empty()) {
        s.notifier.watchdog();
        stall_reported = false;
      } else if (!stall_reported) {
        log::error("thread {} has not made progress for {} ms; withholding the watchdog ping so "
                   "systemd restarts ferryd",
                   stalled.front(), kStaleAfter.count());
        stall_reported = true;
      }
      next_ping = std::chrono::steady_clock::now() + *watchdog;
    }
  }

  s.notifier.stopping();
  withdraw_before_stopping(s, signals);
  s.health_checker.reset();  // no more transitions (nor table rebuilds) while the planes go
  // Listeners and connections close on the control thread, which then runs dry and exits.
  boost::asio::post(s.io, [&s] {
    s.heartbeat_timer.cancel();
    s.announce_timer.cancel();
    s.settle_timer.cancel();
    if (s.metrics_http) s.metrics_http->stop();
    if (s.control) s.control->stop();
    s.work.reset();
    s.io.stop();
  });
  s.control_thread.join();
  s.control_heartbeat.reset();
  s.announcer.reset();  // its routes are already withdrawn
  s.tcp.reset();       // listeners, then connections, then the io_uring workers
  s.link_watch.reset();
  s.fastpath.reset();  // workers joined, XSKMAP emptied, sockets and UMEM gone
  s.xdp.reset();       // then the program is detached and unloaded
  s.metrics_http.reset();
  s.control.reset();
  s.daemon_metrics.reset();
  s.process_metrics.reset();
  log::notice("ferryd stopped");
  return 0;
}

}  // namespace ferry::lifecycle
