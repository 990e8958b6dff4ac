// ferry-decap: attaches, detaches and reports the backend-side decapsulation program of direct
// server return (man ferry-decap(8)). Parses argv; the work is in lib/decap.
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "lib/decap/decap_commands.hh"
#include "lib/decap/status_render.hh"

namespace {

constexpr int exit_failure = 1;
constexpr int exit_usage = 2;

constexpr const char* usage_text =
    "usage: ferry-decap attach IFACE [--gue-port N] [--pin-dir DIR] [--generic]\n"
    "       ferry-decap detach IFACE [--pin-dir DIR]\n"
    "       ferry-decap status [--json] [--pin-dir DIR]\n"
    "       ferry-decap --version | --help\n"
    "DIR defaults to /sys/fs/bpf/ferry-decap; the GUE port to 6080.\n";

struct UsageError {
  std::string message;
};

struct Invocation {
  std::string command;
  std::string ifname;
  std::uint16_t gue_port = ferry::decap::default_gue_port;
  std::string pin_dir = ferry::decap::default_pin_dir;
  bool json = false;
  bool generic = false;
};

std::uint16_t parse_port(const std::string& text) {
  unsigned value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value == 0 || value > 65535) {
    throw UsageError{"--gue-port: \"" + text + "\" is not a port (1 to 65535)"};
  }
  return static_cast<std::uint16_t>(value);
}

Invocation parse(const std::vector<std::string>& args) {
  if (args.empty()) throw UsageError{"a command is missing"};
  Invocation inv;
  inv.command = args[0];
  if (inv.command != "attach" && inv.command != "detach" && inv.command != "status") {
    throw UsageError{"unknown command \"" + inv.command + "\""};
  }
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw UsageError{a + " needs a value"};
      return args[++i];
    };
    if (a == "--pin-dir") {
      inv.pin_dir = value();
      if (inv.pin_dir.empty() || inv.pin_dir[0] != '/') {
        throw UsageError{"--pin-dir: \"" + inv.pin_dir + "\" is not an absolute path"};
      }
    } else if (a == "--gue-port" && inv.command == "attach") {
      inv.gue_port = parse_port(value());
    } else if (a == "--generic" && inv.command == "attach") {
      inv.generic = true;
    } else if (a == "--json" && inv.command == "status") {
      inv.json = true;
    } else if (!a.empty() && a[0] != '-' && inv.command != "status" && inv.ifname.empty()) {
      inv.ifname = a;
    } else {
      throw UsageError{"ferry-decap " + inv.command + ": unexpected argument \"" + a + "\""};
    }
  }
  if (inv.command != "status" && inv.ifname.empty()) {
    throw UsageError{"ferry-decap " + inv.command + ": the interface is missing"};
  }
  return inv;
}

int run(const Invocation& inv) {
  using namespace ferry::decap;
  if (inv.command == "attach") {
    AttachRequest request{inv.ifname, inv.gue_port, inv.pin_dir, inv.generic};
    AttachResult result = attach(request);
    for (const auto& w : result.warnings) std::cerr << "ferry-decap: " << w << "\n";
    for (const auto& n : result.notes) std::cout << n << "\n";
  } else if (inv.command == "detach") {
    std::cout << detach(inv.pin_dir, inv.ifname) << "\n";
  } else {
    auto all = status(inv.pin_dir);
    if (inv.json) {
      std::cout << status_json(inv.pin_dir, all).dump(2) << "\n";
    } else {
      std::cout << status_text(inv.pin_dir, all);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "--version" || args[0] == "-V")) {
    std::cout << "ferry-decap " << FERRY_VERSION << "\n";
    return 0;
  }
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << usage_text;
    return 0;
  }
  Invocation inv;
  try {
    inv = parse(args);
  } catch (const UsageError& e) {
    std::cerr << "ferry-decap: " << e.message << "\n" << usage_text;
    return exit_usage;
  }
  if (geteuid() != 0) {
    std::cerr << "ferry-decap " << inv.command
              << ": must run as root (it loads XDP programs and reads pins on a bpffs)\n";
    return exit_failure;
  }
  try {
    return run(inv);
  } catch (const std::exception& e) {
    std::cerr << "ferry-decap " << inv.command << ": " << e.what() << "\n";
    return exit_failure;
  }
}
