// The running ferryd's side of a handover: start the binary on disk with --takeover, hand it
// the listening sockets, the XDP links and maps, the AF_XDP sockets and the UMEM, stop the
// fast-path workers for it, and once it serves, stop accepting and drain. Any failure of the new
// process before it serves leaves this one serving as it was (docs/operations.md).
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"
#include "lib/common/time_text.hh"
#include "lib/control/protocol.hh"
#include "lib/lifecycle/daemon_state.hh"

extern char** environ;

namespace ferry::lifecycle {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

// How long the new process may take to ask for the handover after it started, and to get ready
// (load its program, map the UMEM) after the offer: generous, since nothing waits meanwhile.
constexpr milliseconds kConnectTimeout{30000};
constexpr milliseconds kReadyTimeout{60000};
// From the pause to the new workers running: the only wait that costs traffic.
constexpr milliseconds kServingTimeout{30000};

int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

// What became of a child that exited, after its pidfd said so.
std::string exit_text(pid_t pid) {
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return "it exited";
  if (WIFEXITED(status)) return fmt::format("it exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("it was killed by signal {}", WTERMSIG(status));
  return "it exited";
}

std::uint32_t fd_index(std::vector<UniqueFd>& fds, UniqueFd fd) {
  fds.push_back(std::move(fd));
  return static_cast<std::uint32_t>(fds.size() - 1);
}

}  // namespace

json Daemon::State::start_upgrade(const std::string& why) {
  if (upgrade.state == "running") {
    throw control::CommandError(
        "busy", fmt::format("an upgrade to pid {} is running already", upgrade.new_pid));
  }
  if (handed_over.load())
    throw control::CommandError("busy", "this ferryd has handed over already");
  if (self_binary.empty()) {
    throw control::CommandError("failed", "the daemon's own binary path is unknown");
  }
  std::vector<std::string> args = {self_binary, "--config", config_path, "--takeover",
                                   config->control.socket};
  if (!start_options.log_level.empty()) {
    args.insert(args.end(), {"--log-level", start_options.log_level});
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The child gets no blocked signals and default handlers (this process blocks its stop
  // signals for sigtimedwait, and posix_spawn would pass that on).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  // Only stdin, stdout and stderr: asio opens its sockets without close-on-exec, and a listener
  // or a client connection the child inherited would stay open in it (and in its successors).
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addclosefrom_np(&files, 3);
  pid_t pid = 0;
  int err = posix_spawn(&pid, self_binary.c_str(), &files, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    ++upgrades_failed;
    throw control::CommandError("failed",
                                fmt::format("starting {}: {}", self_binary, std::strerror(err)));
  }
  UniqueFd pidfd(pidfd_open(pid));
  if (upgrade_thread.joinable()) upgrade_thread.join();  // the previous one has ended
  upgrade = UpgradeState{"running", pid, "", std::chrono::system_clock::now()};
  log::notice("upgrade ({}): started {} as pid {}; it takes over once it is ready", why,
              self_binary, pid);
  upgrade_thread = std::thread([this, pid, fd = std::move(pidfd)]() mutable {
    pthread_setname_np(pthread_self(), "ferry-upgrade");
    guarded_upgrade(pid, std::move(fd));
  });
  return {{"started", true},
          {"old_pid", static_cast<int>(getpid())},
          {"new_pid", static_cast<int>(pid)},
          {"binary", self_binary}};
}

void Daemon::State::take_handover_socket(UniqueFd socket, const control::Peer& peer) {
  if (upgrade.state != "running") {
    // A ferryd started by hand with --takeover: the same handover, without a spawn.
    if (handed_over.load()) return;  // the socket closes: the new process gives up
    if (upgrade_thread.joinable()) upgrade_thread.join();
    upgrade = UpgradeState{"running", peer.pid, "", std::chrono::system_clock::now()};
    log::notice("upgrade: pid {} asks to take over", peer.pid);
    {
      std::lock_guard lock(upgrade_mutex);
      upgrade_channel = std::move(socket);
    }
    upgrade_thread = std::thread([this, pid = peer.pid] {
      pthread_setname_np(pthread_self(), "ferry-upgrade");
      guarded_upgrade(pid, UniqueFd(pidfd_open(pid)));
    });
  } else {
    std::lock_guard lock(upgrade_mutex);
    upgrade_channel = std::move(socket);
  }
  std::uint64_t one = 1;
  if (::write(upgrade_wake.get(), &one, sizeof(one)) < 0) {
    // The eventfd counts; a failed write leaves the thread to its timeout.
  }
}

json Daemon::State::upgrade_status() const {
  return {{"state", upgrade.state},
          {"new_pid", upgrade.new_pid ? json(static_cast<int>(upgrade.new_pid)) : json()},
          {"error", upgrade.error.empty() ? json() : json(upgrade.error)},
          {"binary", self_binary},
          {"started_at", upgrade.started_at ? json(iso8601_utc(*upgrade.started_at)) : json()}};
}

json Daemon::State::handover_offer(std::vector<UniqueFd>& fds) {
  json offer = {
      {"type", "offer"}, {"version", FERRY_VERSION}, {"from_pid", static_cast<int>(getpid())}};
  json control_fds = {{"unix", -1}, {"tcp", -1}};
  if (control) {
    if (int fd = control->unix_fd(); fd >= 0) control_fds["unix"] = fd_index(fds, duplicate_fd(fd));
    if (int fd = control->tcp_fd(); fd >= 0) control_fds["tcp"] = fd_index(fds, duplicate_fd(fd));
  }
  offer["control"] = control_fds;
  offer["metrics"] = -1;
  if (metrics_http && metrics_http->listening_fd() >= 0) {
    offer["metrics"] = fd_index(fds, duplicate_fd(metrics_http->listening_fd()));
  }
  offer["xdp"] = nullptr;
  if (xdp) {
    xdp::HandedOverXdp handed = xdp->hand_over();
    json maps = json::object();
    for (auto& [name, fd] : handed.maps) maps[name] = fd_index(fds, std::move(fd));
    json links = json::array();
    for (auto& l : handed.links) {
      links.push_back({{"ifname", l.ifname},
                       {"ifindex", l.ifindex},
                       {"mode", l.mode == xdp::AttachMode::native ? "native" : "generic"},
                       {"requested", static_cast<int>(l.requested)},
                       {"fd", fd_index(fds, std::move(l.link))}});
    }
    offer["xdp"] = {{"maps", maps}, {"links", links}, {"service_ids", handed.service_ids}};
  }
  offer["fastpath"] = nullptr;
  if (fastpath) {
    std::vector<int> raw;
    fastpath::HandedOverFastpath handed = fastpath->hand_over();
    json d = fastpath::describe(handed, raw);
    // describe() numbers its fds from 0; shift them past the ones already listed.
    std::uint32_t base = static_cast<std::uint32_t>(fds.size());
    d["memfd"] = d["memfd"].get<std::uint32_t>() + base;
    for (auto& ports : d["workers"]) {
      for (auto& p : ports) p["fd"] = p["fd"].get<std::uint32_t>() + base;
    }
    fds.push_back(std::move(handed.memfd));
    for (auto& ports : handed.sockets) {
      for (auto& sock : ports) fds.push_back(std::move(sock.fd));
    }
    offer["fastpath"] = std::move(d);
  }
  json listeners = json::array();
  if (tcp) {
    for (tcp::HandedOverListener& l : tcp->hand_over_listeners()) {
      json idx = json::array();
      for (UniqueFd& fd : l.fds) idx.push_back(fd_index(fds, std::move(fd)));
      listeners.push_back({{"service", l.service},
                           {"kind", l.kind},
                           {"configured", l.configured.to_string()},
                           {"fds", idx}});
    }
  }
  offer["tcp"] = std::move(listeners);
  json admin_state = json::array();
  for (const admin::BackendSteering& b : admin.snapshot()) {
    if (b.admin == admin::BackendAdmin{}) continue;
    admin_state.push_back({{"service", b.service},
                           {"backend", b.backend.to_string()},
                           {"state", std::string(admin::to_string(b.admin.state))},
                           {"weight", b.admin.weight ? json(*b.admin.weight) : json()}});
  }
  json health_state = json::array();
  for (const auto& e : health.snapshot()) {
    health_state.push_back({{"service", e.service},
                            {"backend", e.backend.to_string()},
                            {"up", e.up},
                            {"passed", health.state(e.service, e.backend)->passed.load()}});
  }
  json announced = json::array();
  if (announcer) {
    for (const net::IpAddress& vip : announcer->announced_vips())
      announced.push_back(vip.to_string());
  }
  offer["state"] = {{"admin", admin_state},
                    {"health", health_state},
                    {"announced", announced},
                    {"flows_reset_ms", flows_reset_ms}};
  return offer;
}

void Daemon::State::guarded_upgrade(pid_t pid, UniqueFd pidfd) {
  if (run_guarded("upgrade thread", [&] { run_upgrade(pid, std::move(pidfd)); })) {
    request_fatal_stop("upgrade thread", "the fast path may be left paused");
  }
}

void Daemon::State::run_upgrade(pid_t pid, UniqueFd pidfd) {
  bool paused = false;
  std::string failure;
  try {
    // Wait for the new process to ask for the handover, or to die trying.
    auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
    UniqueFd socket;
    for (;;) {
      {
        std::lock_guard lock(upgrade_mutex);
        if (upgrade_channel) socket = std::move(upgrade_channel);
      }
      if (socket) break;
      if (handed_over.load() || upgrade_stopping.load()) {
        throw handover::ChannelError("ferryd is stopping");
      }
      auto left =
          std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        ::kill(pid, SIGTERM);
        throw handover::ChannelError("it did not ask for the handover within 30 s");
      }
      pollfd pfds[2] = {{upgrade_wake.get(), POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
      int n =
          ::poll(pfds, pidfd ? 2 : 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
      if (n > 0 && (pfds[0].revents & POLLIN)) {
        std::uint64_t v;
        if (::read(upgrade_wake.get(), &v, sizeof(v)) < 0) {
        }
      }
      if (n > 0 && pidfd && (pfds[1].revents & POLLIN)) {
        std::lock_guard lock(upgrade_mutex);
        if (!upgrade_channel) throw handover::ChannelError(exit_text(pid));
      }
    }
    upgrade_socket.store(socket.get());
    handover::Channel channel(std::move(socket));
    std::vector<UniqueFd> fds;
    json offer = on_control_thread(*this, [&] { return handover_offer(fds); });
    std::vector<int> raw;
    for (const UniqueFd& fd : fds) raw.push_back(fd.get());
    channel.send(offer, {}, raw);
    fds.clear();  // the new process has its own copies now
    handover::Message ready = channel.receive(kReadyTimeout);
    if (ready.head.value("type", "") != "ready") throw handover::ChannelError("unexpected message");
    // The pause: from here until the new workers run, no frame is processed (the rings keep
    // what arrives).
    auto [carries, paused_ns] = on_control_thread(*this, [&] {
      std::vector<fastpath::WorkerCarry> c;
      if (fastpath) c = fastpath->stop_for_handover();
      return std::pair(fastpath::pack(c), handover::shared_clock_ns());
    });
    paused = true;
    channel.send({{"type", "paused"}, {"paused_at_ns", paused_ns}}, carries);
    handover::Message serving = channel.receive(kServingTimeout);
    if (serving.head.value("type", "") != "serving") {
      throw handover::ChannelError("unexpected message");
    }
    on_control_thread(*this, [&] { commit_handover(pid); });
    log::notice("upgrade: handed over to ferryd pid {} (fast path paused {} us); draining", pid,
                serving.head.value("pause_us", 0));
    try {
      channel.send({{"type", "done"}});
    } catch (const std::exception&) {
      // The successor serves either way; it only waits for this to say READY to systemd.
    }
    ::kill(getpid(), SIGUSR1);  // the supervisor drains and exits
    upgrade_socket.store(-1);
    return;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  upgrade_socket.store(-1);
  // The new process has failed: it must be gone before this one binds again, since it holds the
  // same sockets (a queue with a live socket reads busy).
  if (pidfd) {
    pollfd p{pidfd.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) {
      ::kill(pid, SIGTERM);
      if (::poll(&p, 1, 5000) <= 0) {
        ::kill(pid, SIGKILL);
        ::poll(&p, 1, 5000);
      }
    }
    std::string how = exit_text(pid);
    if (failure.find("closed the handover") != std::string::npos ||
        failure.find("did not answer") != std::string::npos) {
      failure += " (" + how + ")";
    }
  }
  try {
    on_control_thread(*this, [&] { recover_from_failed_handover(paused, failure); });
  } catch (const std::exception& e) {
    log::error("upgrade: recovering from the failed handover: {}", e.what());
  }
}

void Daemon::State::commit_handover(pid_t successor) {
  handed_over.store(true);
  upgrade.state = "handed_over";
  ++upgrades_ok;
  // The successor owns the fast path: this process's copies close without touching the XSKMAP.
  if (fastpath) fastpath->handed_over();
  link_watch.reset();
  fastpath.reset();
  if (xdp) xdp->handed_over();
  xdp.reset();  // the links run the successor's program; closing the fds detaches nothing
  if (announcer) announcer->release();  // the routes are the successor's
  announcer.reset();
  announcing = false;
  announce_timer.cancel();
  settle_timer.cancel();
  if (control) control->stop_accepting();
  if (metrics_http) metrics_http->stop_accepting();
  if (tcp) tcp->stop_accepting();
  notifier.main_pid(successor, fmt::format("handed over to pid {}; draining", successor));
}

void Daemon::State::recover_from_failed_handover(bool paused, const std::string& why) {
  upgrade.state = "failed";
  upgrade.error = fmt::format("the new ferryd (pid {}) failed: {}", upgrade.new_pid, why);
  ++upgrades_failed;
  log::error("upgrade: {}; this ferryd serves on", upgrade.error);
  // The new process may have swapped its program in and written the maps for its config.
  if (xdp) xdp->reclaim_links();
  if (paused && fastpath) {
    // Its workers may have moved frames: the slabs' free stacks here are stale. Bind anew, as
    // a reload that changes the sockets does (the frames in flight are lost).
    fastpath->handed_over();  // leave the XSKMAP entries to the re-bind
    fastpath.reset();
    log::warning("upgrade: the fast path was paused for the new ferryd; binding it again");
  }
  // The kernel frees the dead process's sockets (and their hold on the queues) from a
  // workqueue: a bind may read busy for a moment.
  constexpr int kAttempts = 20;
  for (int attempt = 1;; ++attempt) {
    try {
      apply_data_plane(*config);
      break;
    } catch (const std::exception& e) {
      if (attempt == kAttempts) throw;
      log::info("upgrade: binding the fast path again: {}; retrying", e.what());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  refresh_announcements();
}

void Daemon::State::stop_upgrade() {
  upgrade_stopping.store(true);
  if (int fd = upgrade_socket.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  std::uint64_t one = 1;
  if (upgrade_wake && ::write(upgrade_wake.get(), &one, sizeof(one)) < 0) {
  }
}

}  // namespace ferry::lifecycle
