// ferryctl's command line: what the operator asked for, parsed and checked before any
// connection is made, and the --help text that documents it (with the exit codes).
#include "lib/ctl/cli.hh"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "lib/ctl/client.hh"
#include "lib/ctl/error.hh"
#include "lib/ctl/prefixes.hh"

namespace ferry::ctl {
namespace {

struct CommandName {
  std::string_view name;
  Command command;
};

constexpr CommandName kCommands[] = {
    {"status", Command::status},   {"stats", Command::stats},       {"services", Command::services},
    {"workers", Command::workers}, {"config", Command::config},     {"reload", Command::reload},
    {"upgrade", Command::upgrade}, {"backend", Command::backend},   {"watch", Command::watch},
    {"top", Command::top},         {"announce", Command::announce}, {"help", Command::help},
};

CtlError usage_error(const std::string& message) {
  return CtlError(ExitCode::usage, message + " (see ferryctl --help)");
}

int parse_int(std::string_view option, std::string_view text, int min) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min) {
    throw usage_error(fmt::format("{} needs an integer >= {}, got '{}'", option, min, text));
  }
  return value;
}

// backend SERVICE BACKEND drain|disable|enable, or backend SERVICE BACKEND weight W.
nlohmann::json backend_args(const std::vector<std::string>& words) {
  constexpr std::string_view kForm =
      "backend needs SERVICE BACKEND drain|disable|enable, or SERVICE BACKEND weight W";
  if (words.size() < 3) throw usage_error(std::string(kForm));
  nlohmann::json args = {{"service", words[0]}, {"backend", words[1]}};
  if (words[2] == "weight") {
    if (words.size() != 4) throw usage_error(std::string(kForm));
    args["weight"] = parse_int("weight", words[3], 0);
    return args;
  }
  if (words[2] != "drain" && words[2] != "disable" && words[2] != "enable") {
    throw usage_error(fmt::format("backend: '{}' is not drain, disable, enable or weight",
                                  words[2]));
  }
  if (words.size() != 3) throw usage_error(std::string(kForm));
  args["state"] = words[2];
  return args;
}

}  // namespace

std::string_view wire_command(Command command) {
  for (const CommandName& c : kCommands) {
    if (c.command == command) return c.name;
  }
  return {};
}

Invocation parse_command_line(const std::vector<std::string>& args, const char* env_socket) {
  Invocation inv;
  inv.socket_path = env_socket && *env_socket ? env_socket : std::string(kDefaultSocketPath);
  std::optional<Command> command;
  std::vector<std::string> positional;
  bool interval_given = false;
  bool count_given = false;
  std::string_view top_only;  // the last option given that only top takes
  bool options_done = false;

  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (options_done || arg.size() < 2 || arg[0] != '-') {
      if (!command) {
        command = [&]() -> Command {
          for (const CommandName& c : kCommands) {
            if (c.name == arg) return c.command;
          }
          throw usage_error(fmt::format("unknown command '{}'", arg));
        }();
      } else {
        positional.emplace_back(arg);
      }
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    std::string_view name = arg;
    std::optional<std::string_view> inline_value;
    if (auto eq = arg.find('='); eq != std::string_view::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    auto value = [&]() -> std::string_view {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw usage_error(fmt::format("{} needs a value", name));
      return args[++i];
    };
    auto flag = [&] {
      if (inline_value) throw usage_error(fmt::format("{} takes no value", name));
    };
    if (name == "--socket" || name == "-s") {
      inv.socket_path = value();
      if (inv.socket_path.empty()) throw usage_error("--socket needs a path");
    } else if (name == "--json" || name == "-j") {
      flag();
      inv.json = true;
    } else if (name == "--timeout-ms") {
      inv.timeout_ms = parse_int(name, value(), 0);
    } else if (name == "--interval-ms") {
      inv.interval_ms = parse_int(name, value(), 1);
      interval_given = true;
    } else if (name == "--count") {
      inv.count = parse_int(name, value(), 1);
      count_given = true;
    } else if (name == "--once") {
      flag();
      inv.count = 1;
      count_given = true;
      top_only = name;
    } else if (name == "--backends") {
      flag();
      inv.backends = true;
      top_only = name;
    } else if (name == "--reasons") {
      flag();
      inv.reasons = true;
      top_only = name;
    } else if (name == "--sort") {
      std::string_view how = value();
      if (how != "traffic" && how != "name") {
        throw usage_error(fmt::format("--sort takes 'traffic' or 'name', got '{}'", how));
      }
      inv.sort_by_name = how == "name";
      top_only = name;
    } else if (name == "--help" || name == "-h") {
      flag();
      inv.command = Command::usage;
      return inv;
    } else if (name == "--version" || name == "-V") {
      flag();
      inv.command = Command::version;
      return inv;
    } else {
      throw usage_error(fmt::format("unknown option '{}'", arg));
    }
  }

  if (!command) throw usage_error("no command given");
  inv.command = *command;
  if (inv.command == Command::backend) {
    inv.args = backend_args(positional);
    positional.clear();
  }
  const bool takes_prefix = inv.command == Command::stats || inv.command == Command::watch;
  if (!takes_prefix && !positional.empty()) {
    throw usage_error(fmt::format("{} takes no arguments, got '{}'", wire_command(inv.command),
                                  positional.back()));
  }
  if (takes_prefix) {
    inv.prefixes = positional;
    inv.prefix = common_prefix(positional);
  }
  const bool repeats = inv.command == Command::watch || inv.command == Command::top;
  if ((interval_given || count_given) && !repeats && top_only.empty()) {
    throw usage_error(fmt::format("{} only applies to watch and top",
                                  interval_given ? "--interval-ms" : "--count"));
  }
  if (!top_only.empty() && inv.command != Command::top) {
    throw usage_error(fmt::format("{} only applies to top", top_only));
  }
  return inv;
}

std::string usage_text() {
  return fmt::format(R"(usage: ferryctl [OPTIONS] COMMAND [ARGS]

Talks to ferryd over its control socket and prints the answer as aligned text.

Commands:
  status               daemon state, uptime, config, control and XDP interfaces
  stats [PREFIX...]    every metric (or those whose name starts with a PREFIX)
  services             configured services and the state of their backends
  workers              worker threads, liveness and heartbeat age
  config               the running configuration
  reload               re-read the config file (ferryd keeps the old one if it is invalid)
  upgrade              hand over to the ferryd binary on disk without dropping traffic, and
                       wait until it serves (or the running one reports why it could not)
  backend SERVICE BACKEND drain|disable|enable
  backend SERVICE BACKEND weight W
                       steer a backend until ferryd restarts: drain (no new flows or
                       connections), disable (no UDP traffic at all), enable, or weight 0..256
  announce             the VIPs this host announces (announce.table), and why each is or is not
  watch [PREFIX...]    stats every interval, with per-second rates of counters
  top                  live view: a row per service with its traffic each way, active
                       connections, drops and errors per second
  help                 the commands ferryd itself offers

Options (before or after the command):
  -s, --socket PATH    control socket (default $FERRY_SOCKET, else {})
  -j, --json           print ferryd's whole JSON response instead of a table
      --timeout-ms N   give up when ferryd has not answered within N ms (default 5000; 0 = wait)
      --interval-ms N  watch, top: time between snapshots (default 1000)
      --count N        watch, top: stop after N frames (default: until Ctrl-C)
      --once           top: one frame (rates over one interval), for scripts
      --backends       top: a row per backend under its service
      --reasons        top: drops and errors by reason under each row
      --sort HOW       top: 'traffic' (busiest first, the default) or 'name'
  -h, --help           this text
  -V, --version        ferryctl's version

Exit status:
  0  success
  1  ferryd answered with an error (printed as "ferryctl: CODE: MESSAGE")
  2  usage error
  3  ferryd is not running (no socket, or connection refused)
  4  permission denied (by the socket's mode, or by ferryd for admin commands)
  5  timeout, or an answer that is not the control protocol
)",
                     kDefaultSocketPath);
}

}  // namespace ferry::ctl
