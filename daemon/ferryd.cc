// ferryd: parses the command line, loads the config and hands over to lifecycle::Daemon.
#include <sysexits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "lib/announce/host_routes.hh"
#include "lib/common/log.hh"
#include "lib/common/thread_guard.hh"
#include "lib/config/config.hh"
#include "lib/lifecycle/daemon.hh"

namespace {

constexpr const char* kDefaultConfig = "/etc/ferry/ferryd.json";

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: ferryd [--config FILE] [--check-config] [--log-level LEVEL]\n"
               "       ferryd --withdraw [--config FILE]\n"
               "       ferryd --takeover SOCKET [--config FILE] [--log-level LEVEL]\n"
               "       ferryd --version | --help\n"
               "\n"
               "  --config FILE      configuration file (default %s)\n"
               "  --check-config     validate the configuration and exit: 0 if valid, 78 with\n"
               "                     FILE:LINE:COL: message on stderr if not\n"
               "  --withdraw         remove the VIP routes ferryd announces (protocol ferry, in\n"
               "                     every table) and exit; the unit runs it as ExecStopPost=\n"
               "  --log-level LEVEL  debug|info|notice|warning|error; overrides log.level\n"
               "  --takeover SOCKET  take over from the ferryd whose control socket is SOCKET:\n"
               "                     its listeners, XDP links and maps, AF_XDP sockets and UMEM\n"
               "                     (what `ferryctl upgrade` and SIGUSR2 start)\n"
               "\n"
               "Runs in the foreground (systemd Type=notify). SIGHUP reloads the configuration,\n"
               "SIGTERM/SIGINT stop gracefully, SIGUSR2 upgrades (as ferryctl upgrade).\n",
               kDefaultConfig);
}

// What ExecStopPost= runs after every end of the service, a SIGKILL included: a dead ferryd's
// routes would keep attracting traffic to this host. ferry's route protocol is its own (one
// announcing ferryd per network namespace), so every table is cleared: the file may name another
// table than the one the dead ferryd used, or be unreadable. The file is only checked, so that a
// broken one is reported.
int withdraw(const std::string& config_path) {
  try {
    ferry::config::load_config(config_path);
  } catch (const ferry::config::ConfigError& e) {
    std::fprintf(stderr, "ferryd: %s (withdrawing anyway)\n", e.what());
  }
  try {
    ferry::announce::HostRoutes routes;
    std::size_t removed = routes.clear(std::nullopt);
    std::printf("ferryd: withdrew %zu route(s) of protocol ferry\n", removed);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferryd: withdrawing the announced routes failed: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = kDefaultConfig;
  std::string level_override;
  bool check_only = false;
  bool withdraw_only = false;
  std::string takeover_socket;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&](std::string_view name) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ferryd: %.*s needs a value\n", static_cast<int>(name.size()), name.data());
        std::exit(EX_USAGE);
      }
      return argv[++i];
    };
    if (arg == "--config" || arg == "-c") {
      config_path = value(arg);
    } else if (arg.starts_with("--config=")) {
      config_path = std::string(arg.substr(9));
    } else if (arg == "--check-config") {
      check_only = true;
    } else if (arg == "--takeover") {
      takeover_socket = value(arg);
    } else if (arg == "--withdraw") {
      withdraw_only = true;
    } else if (arg == "--log-level") {
      level_override = value(arg);
    } else if (arg == "--version") {
      std::printf("ferryd %s\n", FERRY_VERSION);
      return 0;
    } else if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "ferryd: unknown argument '%s'\n", argv[i]);
      usage(stderr);
      return EX_USAGE;
    }
  }

  if (withdraw_only) return withdraw(config_path);

  ferry::config::Config config;
  try {
    config = ferry::config::load_config(config_path);
  } catch (const ferry::config::ConfigError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    if (!takeover_socket.empty())
      ferry::lifecycle::report_takeover_failure(takeover_socket, e.what());
    return EX_CONFIG;
  }
  if (check_only) {
    std::printf("%s: configuration is valid\n", config_path.c_str());
    return 0;
  }

  ferry::log::Level level = ferry::log::Level::info;
  ferry::log::parse_level(config.log.level, level);
  if (!level_override.empty() && !ferry::log::parse_level(level_override, level)) {
    std::fprintf(stderr, "ferryd: --log-level: unknown level '%s'\n", level_override.c_str());
    return EX_USAGE;
  }
  ferry::log::init(level);
  if (!takeover_socket.empty()) {
    // systemd names the main process it watches; the predecessor passes its WATCHDOG_PID on,
    // and after the handover this process is the main one (it said MAINPID=).
    if (const char* pid = std::getenv("WATCHDOG_PID"); pid && std::atoi(pid) == getppid()) {
      setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
    }
  }
  ferry::log::info("ferryd {} starting with {}", FERRY_VERSION, config_path);
  ferry::lifecycle::Daemon daemon(config_path, std::move(config));
  daemon.set_start_options(level_override, takeover_socket);
  // The supervisor's own loop: what escapes it ends the process with a message, not terminate.
  int status = EX_SOFTWARE;
  if (!ferry::run_guarded("supervisor", [&] { status = daemon.run(); })) return status;
  return EX_SOFTWARE;
}
