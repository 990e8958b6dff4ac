// What the daemon owns while it runs: the boards every plane shares, the planes in start order
// (teardown is the reverse), the control thread and the upgrade's conversation. Shared by
// daemon.cc (lifecycle) and the files that give the control commands (control_commands.hh) what
// they read and change.
//
// Threads, and what each may touch:
// * the supervisor (Daemon::run): everything, while the control thread does not run (before it
//   starts and after it is joined); meanwhile only the notifier, the heartbeats, the atomics
//   and what it runs on the control thread (on_control_thread()).
// * the control thread (`io`): the config, the counters, the planes (plane.hh), the upgrade's
//   state; every control command, reload, health refresh and link event runs here.
// * the upgrade thread (upgrade.cc): the channel to the new ferryd, upgrade_channel under
//   upgrade_mutex, the atomics; the planes only through on_control_thread().
// * the health checker's thread: the health board, and posts to the control thread.
// * the workers (fast path, io_uring): their own state, the boards (atomics) and heartbeats.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "lib/admin/admin_board.hh"
#include "lib/config/config.hh"
#include "lib/control/commands.hh"
#include "lib/handover/offer.hh"
#include "lib/health/health_board.hh"
#include "lib/lifecycle/announce_plane.hh"
#include "lib/lifecycle/control_commands.hh"
#include "lib/lifecycle/control_plane.hh"
#include "lib/lifecycle/daemon.hh"
#include "lib/lifecycle/fastpath_plane.hh"
#include "lib/lifecycle/health_plane.hh"
#include "lib/lifecycle/heartbeat.hh"
#include "lib/lifecycle/metrics_plane.hh"
#include "lib/lifecycle/plane_list.hh"
#include "lib/lifecycle/systemd_notifier.hh"
#include "lib/lifecycle/tcp_service_plane.hh"
#include "lib/lifecycle/xdp_program_plane.hh"
#include "lib/metrics/registry.hh"

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

  // Starting afresh (`offer` null) and taking over are one sequence: every plane starts (from
  // its part of the offer), `await_pause` has the running ferryd pause what cannot run in two
  // processes (a takeover only), and every plane serves. Throws with the reason, the planes
  // already unwound in reverse (takeover.cc).
  void bring_up(handover::Offer* offer,
                const std::function<handover::Offer()>& await_pause = nullptr);

  // Re-reads the config file and applies it to every plane, all or nothing; on an invalid file
  // or a plane that refuses it the running config stays and control::CommandError("rejected",
  // "FILE:LINE:COL: message") is thrown. Control thread only.
  nlohmann::json reload(const std::string& reason) override;
  // Brings the health checks, the XDP program, the fast path and the announcer in line with
  // `configured` (the operator's steering applied): an interface's return, a failed handover's
  // recovery. Throws.
  void apply_data_plane(const config::Config& configured);
  // The `backend` command: applies the admin board's change to every plane.
  void apply_steering() override;
  // Rebuilds the fast path's tables after health transitions; posted to the control thread.
  void refresh_backends();
  // A fast-path interface came back (link watch): apply_data_plane() with the running config,
  // as a reload would; posted to the control thread.
  void rebind_data_plane();
  // Why this host cannot serve `service` itself, whatever its backends ("" when it can).
  std::string not_served(const config::ServiceConfig& service) const;
  nlohmann::json announce_report() const override { return announce_plane.report(); }
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
  // On the control thread, from the upgrade thread: the offer, the pause, and the commit.
  handover::Offer handover_offer();
  handover::Offer pause_for_handover();
  void commit_handover(pid_t successor);
  void recover_from_failed_handover(bool paused, const std::string& why);
  nlohmann::json upgrade_status() const;
  void stop_upgrade();  // the stop: ends a running upgrade's conversation
  // takeover.cc, the new ferryd's side: bring_up() from what the running ferryd hands over.
  // Throws with the reason, which the running ferryd is told too.
  void take_over(const std::string& socket_path);

  // Control thread (the supervisor reads `config` while the control thread does not run).
  const std::string config_path;
  std::shared_ptr<const config::Config> config;
  std::chrono::system_clock::time_point started_at = std::chrono::system_clock::now();
  std::chrono::steady_clock::time_point started_steady = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point config_loaded_at = started_at;
  std::uint64_t reloads = 0;
  std::uint64_t reload_failures = 0;
  std::optional<std::string> last_reload_error;

  SystemdNotifier notifier;    // supervisor; main_pid() from the control thread at the commit
  metrics::Registry registry;  // any thread
  HeartbeatBoard heartbeats;   // any thread
  boost::asio::io_context io;
  control::AccessPolicy policy;
  control::CommandTable commands;
  metrics::Registry::Handle process_metrics;
  metrics::Registry::Handle daemon_metrics;
  // The operator's drain/disable/weight per backend (the `backend` command); read when the
  // planes' tables are built. Control thread.
  admin::AdminBoard admin;
  // Backend up/down flags: written by the health checker, read by the fast path and the proxy,
  // so it outlives every plane.
  health::HealthBoard health;
  std::atomic<bool> backends_refresh_posted{false};  // coalesces transitions into one rebuild

  // The planes, in start order; plane.hh says which thread may call what.
  PlaneContext context{io, registry, heartbeats, admin, health};
  ControlPlane control_plane{context, commands, policy,
                             [this](UniqueFd socket, const control::Peer& peer) {
                               take_handover_socket(std::move(socket), peer);
                             }};
  MetricsPlane metrics_plane{context};
  // Before the fast path: a takeover's health states are on the board before its tables.
  HealthPlane health_plane{context,
                           [this] {
                             // The rebuild (Maglev over every UDP service) runs on the control
                             // thread, once for however many transitions arrive before it runs.
                             if (backends_refresh_posted.exchange(true)) return;
                             boost::asio::post(io, [this] { refresh_backends(); });
                           },
                           [this] { announce_plane.post_refresh(); }};
  XdpProgramPlane xdp_plane{context};
  AfXdpPlane fastpath_plane{context, xdp_plane, [this] { rebind_data_plane(); }};
  // Created before the TCP services; announces once every plane serves.
  AnnouncePlane announce_plane{
      context, config, fastpath_plane,
      [this](const config::ServiceConfig& service) { return not_served(service); }};
  TcpServicePlane tcp_plane{context};  // io_uring workers and TCP services; started last
  PlaneList planes{{&control_plane, &metrics_plane, &health_plane, &xdp_plane, &fastpath_plane,
                    &announce_plane, &tcp_plane}};
  // The same planes' apply() for apply_data_plane(), without the TCP side.
  PlaneList data_planes{{&health_plane, &xdp_plane, &fastpath_plane, &announce_plane}};

  // The control thread: runs `io` and beats its heartbeat from a timer on the same loop, so a
  // wedged handler stops the beat and the watchdog notices.
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  boost::asio::steady_timer heartbeat_timer{io};
  std::shared_ptr<Heartbeat> control_heartbeat;
  std::thread control_thread;

  // The handover (upgrade.cc, takeover.cc).
  StartOptions start_options;  // set before run()
  std::string self_binary;     // /proc/self/exe as it was at start
  UpgradeState upgrade;        // control thread
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
