// The daemon's lifecycle: bring every configured part up, tell systemd, supervise (signals,
// watchdog, reload), and tear everything down in reverse order.
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

// The control socket first: a second daemon on the same config stops there, before it can touch
// the first one's interfaces; then the data planes, TCP last.
void start_afresh(Daemon::State& s) {
  s.control = std::make_unique<control::ControlServer>(s.io, s.config->control, s.commands,
                                                       s.policy, s.registry);
  s.control->start();
  if (s.config->metrics.listen) {
    s.metrics_http = s.make_metrics_http();
    s.metrics_http->start();
  }
  s.xdp = std::make_unique<xdp::XdpPlane>(s.registry);
  s.admin.configure(s.config->services);
  s.apply_data_plane(*s.config);
  s.tcp = s.make_tcp_plane();
  s.tcp->start(admin::effective_config(*s.config, s.admin));
  // Every plane serves: the VIPs may attract traffic now (on the control thread, once it runs).
  s.announcing = true;
  boost::asio::post(s.io, [&s] { s.refresh_announcements(); });
}

}  // namespace

std::unique_ptr<metrics::MetricsHttpServer> Daemon::State::make_metrics_http() {
  const config::MetricsConfig& m = config->metrics;
  metrics::MetricsHttpServerOptions options;
  options.max_connections = m.max_connections;
  options.max_connections_per_source = m.max_connections_per_source;
  options.request_timeout = std::chrono::milliseconds(m.request_timeout_ms);
  return std::make_unique<metrics::MetricsHttpServer>(io, *m.listen, registry, options);
}

std::unique_ptr<tcp::TcpPlane> Daemon::State::make_tcp_plane() {
  return std::make_unique<tcp::TcpPlane>(
      registry,
      [this](const std::string& worker) {
        std::shared_ptr<Heartbeat> beat = heartbeats.enroll(worker, "tcp");
        return std::function<void()>([beat] { beat->beat(); });
      },
      &health);
}

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

namespace {

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

}  // namespace

int Daemon::run() {
  State& s = *state_;
  // Signals are taken synchronously by this (supervisor) thread; every thread started from here
  // inherits the mask, so none of them is interrupted by them.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&signals, sig);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  raise_fd_limit();

  auto start_seconds = std::chrono::duration<double>(s.started_at.time_since_epoch()).count();
  s.process_metrics = metrics::register_process_metrics(s.registry, FERRY_VERSION, start_seconds);
  s.daemon_metrics = s.registry.add([&s](metrics::SnapshotBuilder& out) { s.collect(out); });
  register_daemon_commands(s.commands, s);
  s.self_binary = own_binary();
  s.upgrade_wake = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));

  try {
    if (!s.start_options.takeover_socket.empty()) {
      s.take_over(s.start_options.takeover_socket);
    } else {
      start_afresh(s);
    }
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    log::error("ferryd could not start; everything set up so far is being released");
    s.tcp.reset();
    if (s.announcer && !s.start_options.takeover_socket.empty()) s.announcer->release();
    s.announcer.reset();
    s.link_watch.reset();
    s.fastpath.reset();
    s.xdp.reset();
    s.metrics_http.reset();
    s.control.reset();
    return 1;
  }
  if (s.control) {
    s.control->set_socket_taker("handover", [&s](UniqueFd socket, const control::Peer& peer) {
      s.take_handover_socket(std::move(socket), peer);
    });
  }

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

  std::string summary = s.summary();
  log::notice("ferryd {} ready: {}", FERRY_VERSION, summary);
  s.notifier.ready(summary);

  auto watchdog = s.notifier.watchdog_interval();
  auto tick = std::min<std::chrono::milliseconds>(
      watchdog.value_or(std::chrono::milliseconds(1000)), std::chrono::milliseconds(1000));
  auto next_ping = std::chrono::steady_clock::now();
  bool stall_reported = false;
  for (;;) {
    timespec timeout = timespec_of(tick);
    int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) {
      log::notice("received {}, stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      break;
    }
    if (sig == SIGUSR1 && s.handed_over.load()) break;  // from the upgrade thread: drain, exit
    if (sig == SIGUSR2) {
      try {
        on_control_thread(s, [&s] { return s.start_upgrade("SIGUSR2"); });
      } catch (const std::exception& e) {
        log::error("upgrade (SIGUSR2): {}", e.what());
      }
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
        log::error(
            "thread {} has not made progress for {} ms; withholding the watchdog ping so "
            "systemd restarts ferryd",
            stalled.front(), kStaleAfter.count());
        stall_reported = true;
      }
      next_ping = std::chrono::steady_clock::now() + *watchdog;
    }
  }

  const bool handed_over = s.handed_over.load();
  if (handed_over) {
    // The successor serves and systemd follows it; the open connections here drain.
    // Echo connections close at once; proxied ones finish within the drain timeout.
    std::int64_t proxied = s.tcp ? s.tcp->status()["proxy"].value("connections", 0) : 0;
    log::notice("handed over: draining {} proxied TCP connection(s) for up to {} ms", proxied,
                s.config->tcp.proxy.drain_timeout_ms);
  } else {
    s.notifier.stopping();
    withdraw_before_stopping(s, signals);
  }
  s.stop_upgrade();
  if (s.upgrade_thread.joinable()) s.upgrade_thread.join();
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
  s.tcp.reset();        // listeners, then connections, then the io_uring workers
  s.link_watch.reset();
  s.fastpath.reset();  // workers joined, XSKMAP emptied, sockets and UMEM gone
  s.xdp.reset();       // then the program is detached and unloaded
  s.metrics_http.reset();
  s.control.reset();
  s.daemon_metrics.reset();
  s.process_metrics.reset();
  log::notice("ferryd stopped{}", handed_over ? " after handing over" : "");
  return fatal_stop_status();
}

}  // namespace ferry::lifecycle
