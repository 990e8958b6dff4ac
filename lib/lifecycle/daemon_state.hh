// What the daemon owns while it runs, in construction order (teardown is the reverse). Shared by
// daemon.cc (lifecycle) and the files that give the control commands (control_commands.hh) what
// they read and change.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "lib/admin/admin_board.hh"
#include "lib/announce/announcer.hh"
#include "lib/config/config.hh"
#include "lib/control/commands.hh"
#include "lib/control/server.hh"
#include "lib/fastpath/fastpath_plane.hh"
#include "lib/fastpath/link_watch.hh"
#include "lib/handover/channel.hh"
#include "lib/health/health_board.hh"
#include "lib/health/health_checker.hh"
#include "lib/lifecycle/control_commands.hh"
#include "lib/lifecycle/daemon.hh"
#include "lib/lifecycle/heartbeat.hh"
#include "lib/lifecycle/systemd_notifier.hh"
#include "lib/metrics/http_server.hh"
#include "lib/metrics/registry.hh"
#include "lib/tcp_plane/tcp_plane.hh"
#include "lib/xdp/xdp_plane.hh"

namespace ferry::lifecycle {

inline constexpr std::chrono::milliseconds kHeartbeatPeriod{250};
inline constexpr std::chrono::milliseconds kStaleAfter{3000};

// How the daemon was started, for the successor an upgrade starts.
struct StartOptions {
  std::string log_level;        // --log-level, empty when not given
  std::string takeover_socket;  // --takeover: the running ferryd's control socket
};

// Where an upgrade stands, in the ferryd that runs it (upgrade.cc).
struct UpgradeState {
  std::string state = "idle";  // idle | running | failed | handed_over
  pid_t new_pid = 0;
  std::string error;
  std::optional<std::chrono::system_clock::time_point> started_at;
};

// Final: it is a CommandTarget (whose destructor is not virtual) and is deleted as a State.
struct Daemon::State final : CommandTarget {
  State(std::string path, config::Config initial);

  // Re-reads the config file and applies it; on an invalid file the running config stays and
  // control::CommandError("rejected", "FILE:LINE:COL: message") is thrown. Control thread only.
  nlohmann::json reload(const std::string& reason) override;
  // Brings the XDP program and the AF_XDP fast path in line with `configured` with the operator's
  // steering applied (startup, reload, `backend`); see data_plane.cc for the order. Throws,
  // leaving the caller to re-apply the running config.
  void apply_data_plane(const config::Config& configured);
  // The `backend` command: applies the admin board's change to both data planes.
  void apply_steering() override;
  // Hands `next`'s checked backends to the health checker (started on first need) and drops
  // removed backends from the board; part of apply_data_plane.
  void apply_health(const config::Config& next);
  // Rebuilds the fast path's tables after health transitions; posted to the control thread.
  void refresh_backends();
  // Rebuilds and publishes the fast path's tables from the running config (no-op without a fast
  // path), logging `why` and the time it took; a failure is logged and the previous tables stay.
  void rebuild_fastpath_tables(std::string_view why);
  // A fast-path interface came back (link_watch): apply_data_plane() with the running config,
  // as a reload would; posted to the control thread.
  void rebind_data_plane();
  // Hands the fast path's bound interfaces to link_watch (creating it with the first plane).
  void follow_links();
  // announcing.cc: creates, re-configures or removes the announcer for `next` (part of
  // apply_data_plane, so a failure rejects a reload); refresh_announcements() brings the routes
  // in line with the running config, health and admin state (after start, reload, `backend`,
  // health transitions and first passing checks; post_announce_refresh() from other threads);
  // withdraw_announcements() on stop, returning how many VIPs were announced.
  void apply_announce(const config::Config& next);
  void refresh_announcements();
  void post_announce_refresh();
  std::size_t withdraw_announcements();
  nlohmann::json announce_report() const override;
  std::string summary() const;
  nlohmann::json tcp_control_listen() const;  // the bound address, or null when off
  // daemon_reports.cc: what status, services and workers answer.
  nlohmann::json status_report() const override;
  nlohmann::json services_report() const override;
  nlohmann::json workers_report() const override;
  const std::string& config_file() const override { return config_path; }
  const config::Config& running_config() const override { return *config; }
  metrics::Registry& metrics_registry() override { return registry; }
  admin::AdminBoard& admin_board() override { return admin; }
  health::HealthBoard& health_board() override { return health; }
  void collect(metrics::SnapshotBuilder& out) const;
  // The TCP plane, its workers enrolled for heartbeats, honouring `health`; not started.
  std::unique_ptr<tcp::TcpPlane> make_tcp_plane();
  // The /metrics endpoint on metrics.listen with the config's budgets; not started. Only when
  // metrics.listen is set.
  std::unique_ptr<metrics::MetricsHttpServer> make_metrics_http();

  // upgrade.cc, the running ferryd's side of a handover. start_upgrade() (control thread; the
  // `upgrade` command and SIGUSR2) starts the binary at self_binary with --takeover; the new
  // process's `handover` request reaches take_handover_socket(), and the upgrade thread talks
  // to it from then on (run_upgrade()). Throws control::CommandError.
  nlohmann::json start_upgrade(const std::string& why) override;
  void take_handover_socket(UniqueFd socket, const control::Peer& peer);
  void run_upgrade(pid_t pid, UniqueFd pidfd);
  // The upgrade thread's body: run_upgrade(), and a fatal stop if anything escapes even its
  // recovery (the planes may be half paused).
  void guarded_upgrade(pid_t pid, UniqueFd pidfd);
  // On the control thread, from the upgrade thread: what is handed over, and the commit.
  nlohmann::json handover_offer(std::vector<UniqueFd>& fds);
  void commit_handover(pid_t successor);
  void recover_from_failed_handover(bool paused, const std::string& why);
  nlohmann::json upgrade_status() const;
  void stop_upgrade();  // the stop: ends a running upgrade's conversation
  // takeover.cc, the new ferryd's side: everything run() brings up, from what the running
  // ferryd hands over. Throws with the reason, which the running ferryd is told too.
  void take_over(const std::string& socket_path);

  const std::string config_path;
  std::shared_ptr<const config::Config> config;  // read and swapped on the control thread only
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
  std::chrono::steady_clock::time_point started_steady = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point config_loaded_at = started_at;
  std::uint64_t reloads = 0;
  std::uint64_t reload_failures = 0;
  std::optional<std::string> last_reload_error;

  SystemdNotifier notifier;
  metrics::Registry registry;
  HeartbeatBoard heartbeats;
  boost::asio::io_context io;
  control::AccessPolicy policy;
  control::CommandTable commands;
  metrics::Registry::Handle process_metrics;
  metrics::Registry::Handle daemon_metrics;
  std::unique_ptr<control::ControlServer> control;
  std::unique_ptr<metrics::MetricsHttpServer> metrics_http;
  // The operator's drain/disable/weight per backend (the `backend` command); read when the
  // planes' tables are built.
  admin::AdminBoard admin;
  // Backend up/down flags: written by the health checker, read by the fast path and the proxy,
  // so it outlives both.
  health::HealthBoard health;
  // Writes `health`; created when a service first has health checks, stopped before the planes.
  std::unique_ptr<health::HealthChecker> health_checker;
  std::atomic<bool> backends_refresh_posted{false};  // coalesces transitions into one rebuild
  std::unique_ptr<xdp::XdpPlane> xdp;
  std::unique_ptr<fastpath::FastpathPlane> fastpath;  // uses xdp's maps: goes first
  std::unique_ptr<tcp::TcpPlane> tcp;  // io_uring workers and TCP services; started last
  // Follows the fast path's interfaces across re-binds (created with the first one); runs on `io`.
  std::unique_ptr<fastpath::LinkWatch> link_watch;
  // The VIP routes for the routing daemon (announce on); `announcing` is set once every plane
  // serves, and cleared when the stop withdraws them.
  std::unique_ptr<announce::Announcer> announcer;
  bool announcing = false;
  std::atomic<bool> announce_refresh_posted{false};
  // By VIP: when the fast path's flows to it were last reset (announced again); see announcing.cc.
  std::map<std::string, std::uint32_t> flows_reset_ms;
  boost::asio::steady_timer announce_timer{io};  // reconcile, every few seconds
  boost::asio::steady_timer settle_timer{io};    // the next VIP whose health view settles

  // The control thread: runs `io` and beats its heartbeat from a timer on the same loop, so a
  // wedged handler stops the beat and the watchdog notices.
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  boost::asio::steady_timer heartbeat_timer{io};
  std::shared_ptr<Heartbeat> control_heartbeat;
  std::thread control_thread;

  // The handover (upgrade.cc, takeover.cc).
  StartOptions start_options;
  std::string self_binary;  // /proc/self/exe as it was at start
  UpgradeState upgrade;     // control thread
  std::mutex upgrade_mutex;
  UniqueFd upgrade_channel;  // the new process's request, until the upgrade thread takes it
  UniqueFd upgrade_wake;     // eventfd: the channel arrived, or the stop wants the thread out
  std::atomic<int> upgrade_socket{-1};  // the conversation's fd, for the stop to shut down
  std::thread upgrade_thread;
  std::atomic<bool> handed_over{false};  // the successor serves: drain and exit
  nlohmann::json handover;               // in a ferryd that took over: how it went
  std::atomic<double> handover_pause_seconds{0};
  std::atomic<std::uint64_t> upgrades_ok{0};
  std::atomic<std::uint64_t> upgrades_failed{0};
  std::atomic<bool> upgrade_stopping{false};
  // A takeover hands these to apply_data_plane() and apply_announce(), which take them once.
  std::optional<fastpath::HandedOverFastpath> handed_fastpath;
  std::optional<std::vector<net::IpAddress>> carried_vips;
};

// Runs `fn` on the control thread and waits for it; exceptions come back to the caller.
template <typename Fn>
auto on_control_thread(Daemon::State& s, Fn fn) {
  std::packaged_task<decltype(fn())()> task(std::move(fn));
  auto result = task.get_future();
  boost::asio::post(s.io, [&task] { task(); });
  return result.get();
}

}  // namespace ferry::lifecycle
