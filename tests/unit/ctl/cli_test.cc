// ferryctl's command-line parsing: commands, options anywhere, socket precedence, usage errors.
#include "lib/ctl/cli.hh"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lib/ctl/client.hh"
#include "lib/ctl/error.hh"

namespace ferry::ctl {
namespace {

using nlohmann::json;

Invocation parse(std::vector<std::string> args, const char* env = nullptr) {
  return parse_command_line(args, env);
}

std::string usage_error(std::vector<std::string> args) {
  try {
    parse(args);
  } catch (const CtlError& e) {
    EXPECT_EQ(e.exit_code(), ExitCode::usage);
    return e.what();
  }
  ADD_FAILURE() << "parsed without error";
  return {};
}

TEST(CommandLine, DefaultsToTheStandardSocketAndFiveSecondTimeout) {
  Invocation inv = parse({"status"});
  EXPECT_EQ(inv.command, Command::status);
  EXPECT_EQ(inv.socket_path, "/run/ferry/ferryd.sock");
  EXPECT_EQ(inv.timeout_ms, 5000);
  EXPECT_FALSE(inv.json);
  EXPECT_EQ(inv.prefix, "");
}

TEST(CommandLine, SocketOptionWinsOverFerrySocketWhichWinsOverTheDefault) {
  EXPECT_EQ(parse({"status"}, "/tmp/env.sock").socket_path, "/tmp/env.sock");
  EXPECT_EQ(parse({"status"}, "").socket_path, kDefaultSocketPath);
  EXPECT_EQ(parse({"status", "--socket", "/tmp/opt.sock"}, "/tmp/env.sock").socket_path,
            "/tmp/opt.sock");
}

TEST(CommandLine, AcceptsOptionsBeforeAndAfterTheCommandInBothSpellings) {
  Invocation inv = parse({"--json", "stats", "ferry_xdp_", "--socket=/s", "--timeout-ms", "250"});
  EXPECT_EQ(inv.command, Command::stats);
  EXPECT_TRUE(inv.json);
  EXPECT_EQ(inv.socket_path, "/s");
  EXPECT_EQ(inv.timeout_ms, 250);
  EXPECT_EQ(inv.prefix, "ferry_xdp_");
  EXPECT_EQ(parse({"-s", "/short", "-j", "config"}).socket_path, "/short");
}

TEST(CommandLine, ParsesWatchOptions) {
  Invocation inv = parse({"watch", "ferry_proxy_", "--interval-ms", "200", "--count=3"});
  EXPECT_EQ(inv.command, Command::watch);
  EXPECT_EQ(inv.prefix, "ferry_proxy_");
  EXPECT_EQ(inv.interval_ms, 200);
  EXPECT_EQ(inv.count, 3);
  Invocation defaults = parse({"watch"});
  EXPECT_EQ(defaults.interval_ms, 1000);
  EXPECT_EQ(defaults.count, 0);
}

TEST(CommandLine, ParsesTopOptions) {
  Invocation inv = parse({"top", "--backends", "--reasons", "--sort", "name", "--interval-ms=500"});
  EXPECT_EQ(inv.command, Command::top);
  EXPECT_TRUE(inv.backends);
  EXPECT_TRUE(inv.reasons);
  EXPECT_TRUE(inv.sort_by_name);
  EXPECT_EQ(inv.interval_ms, 500);
  EXPECT_EQ(inv.count, 0);
  EXPECT_EQ(parse({"top", "--once"}).count, 1);
  EXPECT_EQ(parse({"top", "--count", "4"}).count, 4);
  Invocation defaults = parse({"top"});
  EXPECT_FALSE(defaults.backends || defaults.reasons || defaults.sort_by_name);
  EXPECT_FALSE(parse({"top", "--sort=traffic"}).sort_by_name);
}

TEST(CommandLine, BackendTakesAStateOrAWeight) {
  Invocation drain = parse({"backend", "web", "10.0.1.2:80", "drain"});
  EXPECT_EQ(drain.command, Command::backend);
  EXPECT_EQ(drain.args, json({{"service", "web"}, {"backend", "10.0.1.2:80"}, {"state", "drain"}}));
  EXPECT_EQ(wire_command(Command::backend), "backend");
  EXPECT_EQ(parse({"backend", "web", "[::1]:80", "weight", "3"}).args,
            json({{"service", "web"}, {"backend", "[::1]:80"}, {"weight", 3}}));
  EXPECT_EQ(parse({"backend", "web", "b", "enable"}).args["state"], "enable");
  EXPECT_EQ(parse({"backend", "web", "b", "disable"}).args["state"], "disable");
  const std::string form =
      "backend needs SERVICE BACKEND drain|disable|enable, or SERVICE BACKEND weight W (see "
      "ferryctl --help)";
  EXPECT_EQ(usage_error({"backend", "web", "b"}), form);
  EXPECT_EQ(usage_error({"backend", "web", "b", "weight"}), form);
  EXPECT_EQ(usage_error({"backend", "web", "b", "drain", "now"}), form);
  EXPECT_EQ(usage_error({"backend", "web", "b", "weight", "x"}),
            "weight needs an integer >= 0, got 'x' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"backend", "web", "b", "weight", "--", "-1"}),
            "weight needs an integer >= 0, got '-1' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"backend", "web", "b", "pause"}),
            "backend: 'pause' is not drain, disable, enable or weight (see ferryctl --help)");
}

TEST(CommandLine, SeveralPrefixesAskFerrydForTheirCommonStart) {
  Invocation inv = parse({"watch", "ferry_xdp_packets", "ferry_proxy_bytes", "--count=1"});
  EXPECT_EQ(inv.prefixes, (std::vector<std::string>{"ferry_xdp_packets", "ferry_proxy_bytes"}));
  EXPECT_EQ(inv.prefix, "ferry_");
  EXPECT_EQ(parse({"stats", "abc", "xyz"}).prefix, "");
  EXPECT_EQ(parse({"stats"}).prefixes.size(), 0u);
}

TEST(CommandLine, HelpAndVersionWinAnywhere) {
  EXPECT_EQ(parse({"stats", "--help"}).command, Command::usage);
  EXPECT_EQ(parse({"-h"}).command, Command::usage);
  EXPECT_EQ(parse({"--version"}).command, Command::version);
  EXPECT_EQ(parse({"help"}).command, Command::help);  // the daemon's list, not local usage
}

TEST(CommandLine, DoubleDashEndsOptions) {
  EXPECT_EQ(parse({"stats", "--", "--odd"}).prefix, "--odd");
}

TEST(CommandLine, RejectsBadCommandLinesWithAReason) {
  EXPECT_EQ(usage_error({}), "no command given (see ferryctl --help)");
  EXPECT_EQ(usage_error({"--json"}), "no command given (see ferryctl --help)");
  EXPECT_EQ(usage_error({"stat"}), "unknown command 'stat' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"status", "--verbose"}),
            "unknown option '--verbose' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"status", "--socket"}), "--socket needs a value (see ferryctl --help)");
  EXPECT_EQ(usage_error({"status", "extra"}),
            "status takes no arguments, got 'extra' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"stats", "--count", "2"}),
            "--count only applies to watch and top (see ferryctl --help)");
  EXPECT_EQ(usage_error({"watch", "--once"}), "--once only applies to top (see ferryctl --help)");
  EXPECT_EQ(usage_error({"status", "--backends"}),
            "--backends only applies to top (see ferryctl --help)");
  EXPECT_EQ(usage_error({"top", "--sort", "rate"}),
            "--sort takes 'traffic' or 'name', got 'rate' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"top", "extra"}), "top takes no arguments, got 'extra' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"watch", "--interval-ms", "0"}),
            "--interval-ms needs an integer >= 1, got '0' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"status", "--timeout-ms", "5s"}),
            "--timeout-ms needs an integer >= 0, got '5s' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"status", "--json=yes"}), "--json takes no value (see ferryctl --help)");
}

TEST(CommandLine, UpgradeIsACommandOfItsOwnWithoutArguments) {
  Invocation inv = parse({"upgrade"});
  EXPECT_EQ(inv.command, Command::upgrade);
  EXPECT_EQ(wire_command(Command::upgrade), "upgrade");
  Invocation with_options =
      parse({"--json", "upgrade", "--socket=/tmp/u.sock", "--timeout-ms", "0"});
  EXPECT_EQ(with_options.command, Command::upgrade);
  EXPECT_TRUE(with_options.json);
  EXPECT_EQ(with_options.socket_path, "/tmp/u.sock");
  EXPECT_EQ(with_options.timeout_ms, 0);
  EXPECT_EQ(usage_error({"upgrade", "now"}),
            "upgrade takes no arguments, got 'now' (see ferryctl --help)");
  EXPECT_EQ(usage_error({"upgrade", "--count", "2"}),
            "--count only applies to watch and top (see ferryctl --help)");
}

TEST(CommandLine, UsageDocumentsEveryCommandAndExitCode) {
  std::string usage = usage_text();
  for (const char* word :
       {"status", "stats [PREFIX...]", "services", "workers", "config", "reload", "\n  upgrade ",
        "watch [PREFIX...]", "help", "--socket", "--json", "--timeout-ms", "--interval-ms",
        "--count", "FERRY_SOCKET", "/run/ferry/ferryd.sock"}) {
    EXPECT_NE(usage.find(word), std::string::npos) << word;
  }
  for (const char* code : {"\n  0  ", "\n  1  ", "\n  2  ", "\n  3  ", "\n  4  ", "\n  5  "}) {
    EXPECT_NE(usage.find(code), std::string::npos) << code;
  }
}

}  // namespace
}  // namespace ferry::ctl
