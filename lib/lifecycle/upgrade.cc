// The running ferryd's side of a handover: start the binary on disk with --takeover, hand it
// every plane's part of the offer (the listening sockets, the XDP links and maps, the AF_XDP
// sockets and the UMEM, the boards' state), pause the fast-path workers for it, and once it
// serves, release every plane and drain. Any failure of the new
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

#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"
#include "lib/common/time_text.hh"
#include "lib/control/protocol.hh"
#include "lib/lifecycle/admin_part.hh"
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

handover::Offer Daemon::State::handover_offer() {
  handover::Offer offer;
  offer.version = FERRY_VERSION;
  offer.from_pid = static_cast<int>(getpid());
  describe_admin(admin, offer.part("admin"));
  planes.describe(offer);
  return offer;
}

// From here until the new workers run, no frame is processed (the rings keep what arrives).
handover::Offer Daemon::State::pause_for_handover() {
  handover::Offer paused;
  paused.stage = "paused";
  paused.version = FERRY_VERSION;
  paused.from_pid = static_cast<int>(getpid());
  planes.pause(paused);
  paused.at_ns = handover::shared_clock_ns();
  return paused;
}

void Daemon::State::guarded_upgrade(pid_t pid, UniqueFd pidfd) {
  if (run_guarded("upgrade thread", [&] { run_upgrade(pid, std::move(pidfd)); })) {
    request_fatal_stop("upgrade thread", "the fast path may be left paused");
  }
}

namespace {

void send(handover::Channel& channel, const handover::Offer& offer) {
  handover::Offer::Wire wire = offer.encode();
  channel.send(wire.head, wire.body, wire.fds);
}

handover::Message expect(handover::Channel& channel, std::string_view type,
                         std::chrono::milliseconds timeout) {
  handover::Message m = channel.receive(timeout);
  if (m.head.value("type", "") != type) throw handover::ChannelError("unexpected message");
  return m;
}

// Waits for the new process to ask for the handover (its socket, through
// take_handover_socket()), or to die trying.
UniqueFd await_channel(Daemon::State& s, pid_t pid, const UniqueFd& pidfd) {
  auto deadline = std::chrono::steady_clock::now() + kConnectTimeout;
  for (;;) {
    {
      std::lock_guard lock(s.upgrade_mutex);
      if (s.upgrade_channel) return std::move(s.upgrade_channel);
    }
    if (s.handed_over.load() || s.upgrade_stopping.load()) {
      throw handover::ChannelError("ferryd is stopping");
    }
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGTERM);
      throw handover::ChannelError("it did not ask for the handover within 30 s");
    }
    pollfd pfds[2] = {{s.upgrade_wake.get(), POLLIN, 0}, {pidfd.get(), POLLIN, 0}};
    int n =
        ::poll(pfds, pidfd ? 2 : 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (n > 0 && (pfds[0].revents & POLLIN)) {
      std::uint64_t v;
      if (::read(s.upgrade_wake.get(), &v, sizeof(v)) < 0) {
      }
    }
    if (n > 0 && pidfd && (pfds[1].revents & POLLIN)) {
      std::lock_guard lock(s.upgrade_mutex);
      if (!s.upgrade_channel) throw handover::ChannelError(exit_text(pid));
    }
  }
}

// A failed new process must be gone before this one binds again, since it holds the same
// sockets (a queue with a live socket reads busy). Returns how it ended.
std::string end_failed_successor(pid_t pid, const UniqueFd& pidfd) {
  pollfd p{pidfd.get(), POLLIN, 0};
  if (::poll(&p, 1, 200) <= 0) {
    ::kill(pid, SIGTERM);
    if (::poll(&p, 1, 5000) <= 0) {
      ::kill(pid, SIGKILL);
      ::poll(&p, 1, 5000);
    }
  }
  return exit_text(pid);
}

}  // namespace

// The conversation: the offer, the new process ready, the pause, the new process serving, the
// commit. `paused` tells a failure whether the fast path here was paused.
void Daemon::State::run_upgrade(pid_t pid, UniqueFd pidfd) {
  bool paused = false;
  std::string failure;
  try {
    UniqueFd socket = await_channel(*this, pid, pidfd);
    upgrade_socket.store(socket.get());
    handover::Channel channel(std::move(socket));
    // The offer's fds are copies: they close here once sent, the new process has its own.
    send(channel, on_control_thread(*this, [this] { return handover_offer(); }));
    expect(channel, "ready", kReadyTimeout);
    handover::Offer carried = on_control_thread(*this, [this] { return pause_for_handover(); });
    paused = true;
    send(channel, carried);
    handover::Message serving = expect(channel, "serving", kServingTimeout);
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
  if (pidfd) {
    std::string how = end_failed_successor(pid, pidfd);
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

// The successor serves: every plane leaves it what it handed over (the fast path's sockets,
// the XDP links, the routes) and stops accepting; the open connections here drain.
void Daemon::State::commit_handover(pid_t successor) {
  handed_over.store(true);
  upgrade.state = "handed_over";
  ++upgrades_ok;
  planes.release();
  notifier.main_pid(successor, fmt::format("handed over to pid {}; draining", successor));
}

void Daemon::State::recover_from_failed_handover(bool paused, const std::string& why) {
  upgrade.state = "failed";
  upgrade.error = fmt::format("the new ferryd (pid {}) failed: {}", upgrade.new_pid, why);
  ++upgrades_failed;
  log::error("upgrade: {}; this ferryd serves on", upgrade.error);
  // The new process may have swapped its program in and written the maps for its config.
  xdp_plane.reclaim_links();
  if (paused && fastpath_plane.plane()) {
    // Its workers may have moved frames: the slabs' free stacks here are stale. Bind anew, as
    // a reload that changes the sockets does (the frames in flight are lost).
    fastpath_plane.drop_paused();
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
  announce_plane.refresh();
}

void Daemon::State::stop_upgrade() {
  upgrade_stopping.store(true);
  if (int fd = upgrade_socket.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
  std::uint64_t one = 1;
  if (upgrade_wake && ::write(upgrade_wake.get(), &one, sizeof(one)) < 0) {
  }
}

}  // namespace ferry::lifecycle
