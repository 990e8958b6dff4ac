// The control-protocol client (request framing, id matching, timeouts, errno -> exit code) and
// whole ferryctl invocations against a fake ferryd.
#include "lib/ctl/client.hh"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>

#include "lib/ctl/cli.hh"
#include "lib/ctl/render.hh"
#include "lib/ctl/run.hh"
#include "tests/unit/ctl/fake_daemon.hh"

namespace ferry::ctl {
namespace {

using nlohmann::json;
using testing::error_response;
using testing::FakeDaemon;
using testing::ok_response;
using testing::TempDir;

// A connected pair: the client end for Client, the other end played by the test itself.
struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    client.reset(fds[0]);
    daemon.reset(fds[1]);
  }
  void daemon_writes(const std::string& text) const {
    ASSERT_EQ(::write(daemon.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }
  std::string daemon_reads() const {
    char buffer[4096];
    ssize_t n = ::read(daemon.get(), buffer, sizeof buffer);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : std::string();
  }
  UniqueFd client, daemon;
};

// Runs fn and returns the CtlError it throws (fails the test when it throws none).
template <typename Fn>
CtlError error_from(Fn&& fn) {
  try {
    fn();
  } catch (const CtlError& e) {
    return e;
  }
  ADD_FAILURE() << "no CtlError thrown";
  return CtlError(ExitCode::ok, "");
}

TEST(Client, SendsOneRequestLineWithIdCmdAndArgs) {
  SocketPair pair;
  pair.daemon_writes(R"({"id":1,"ok":true,"result":{"metrics":[]}})"
                     "\n");
  Client client(std::move(pair.client), 1000);
  Response response = client.call("stats", json{{"prefix", "ferry_xdp"}});
  EXPECT_EQ(pair.daemon_reads(), R"({"args":{"prefix":"ferry_xdp"},"cmd":"stats","id":1})"
                                 "\n");
  ASSERT_TRUE(response.ok);
  EXPECT_EQ(response.result, json::parse(R"({"metrics":[]})"));
  EXPECT_EQ(response.raw["id"], 1);
}

TEST(Client, SkipsAnswersToOtherIdsAndKeepsBytesPastTheLine) {
  SocketPair pair;
  // A stale answer, ours, and the next call's answer arrive in one read.
  pair.daemon_writes(R"({"id":99,"ok":true,"result":"stale"})"
                     "\n"
                     R"({"id":1,"ok":true,"result":"first"})"
                     "\n"
                     R"({"id":2,"ok":true,"result":"second"})"
                     "\n");
  Client client(std::move(pair.client), 1000);
  EXPECT_EQ(client.call("status").result, "first");
  EXPECT_EQ(client.call("status").result, "second");
}

TEST(Client, TakesAnErrorWithNullIdAsTheAnswer) {
  SocketPair pair;
  pair.daemon_writes(R"({"id":null,"ok":false,"error":{"code":"bad_request","message":"not JSON"}})"
                     "\n");
  Client client(std::move(pair.client), 1000);
  Response response = client.call("status");
  EXPECT_FALSE(response.ok);
  EXPECT_EQ(response.error_code, "bad_request");
  EXPECT_EQ(response.error_message, "not JSON");
}

TEST(Client, TimesOutWhenFerrydDoesNotAnswer) {
  SocketPair pair;
  Client client(std::move(pair.client), 50);
  CtlError e = error_from([&] { client.call("status"); });
  EXPECT_EQ(e.exit_code(), ExitCode::timeout);
  EXPECT_STREQ(e.what(),
               "ferryd did not answer 'status' within 50 ms (is it stuck? raise --timeout-ms to "
               "wait longer)");
}

TEST(Client, ReportsAConnectionClosedBeforeTheAnswer) {
  SocketPair pair;
  pair.daemon_writes(R"({"id":1,"ok":tr)");
  pair.daemon.reset();
  Client client(std::move(pair.client), 1000);
  CtlError e = error_from([&] { client.call("reload"); });
  EXPECT_EQ(e.exit_code(), ExitCode::timeout);
  EXPECT_STREQ(e.what(),
               "ferryd closed the connection before answering 'reload' (did it stop or restart?)");
}

TEST(ParseResponse, RejectsLinesThatAreNotTheProtocol) {
  for (const char* bad :
       {"not json", "[1]", R"({"ok":true,"result":1})", R"({"id":1})",
        R"({"id":1,"ok":"yes","result":1})", R"({"id":1,"ok":true})", R"({"id":1,"ok":false})",
        R"({"id":1,"ok":false,"error":"x"})", R"({"id":1,"ok":false,"error":{"message":"m"}})"}) {
    CtlError e = error_from([&] { parse_response(bad); });
    EXPECT_EQ(e.exit_code(), ExitCode::timeout) << bad;
    EXPECT_EQ(std::string(e.what()).rfind("malformed response from ferryd (", 0), 0u) << e.what();
  }
  EXPECT_STREQ(error_from([] { parse_response("garbage"); }).what(),
               "malformed response from ferryd (not JSON): garbage");
}

TEST(ExpectOk, MapsDaemonErrorCodesToExitCodes) {
  Response ok = parse_response(R"({"id":1,"ok":true,"result":{"a":1}})");
  EXPECT_EQ(expect_ok(ok), json::parse(R"({"a":1})"));
  struct Case {
    const char* code;
    ExitCode exit;
  } cases[] = {{"permission_denied", ExitCode::permission_denied},
               {"unauthorized", ExitCode::permission_denied},
               {"bad_args", ExitCode::daemon_error},
               {"unknown_command", ExitCode::daemon_error},
               {"rejected", ExitCode::daemon_error},
               {"internal", ExitCode::daemon_error}};
  for (const Case& c : cases) {
    Response error = parse_response(
        json{{"id", 1}, {"ok", false}, {"error", {{"code", c.code}, {"message", "why"}}}}.dump());
    CtlError e = error_from([&] { expect_ok(error); });
    EXPECT_EQ(e.exit_code(), c.exit) << c.code;
    EXPECT_EQ(std::string(e.what()), std::string(c.code) + ": why");
  }
}

TEST(ConnectErrno, MapsToTheDocumentedExitCodes) {
  EXPECT_EQ(connect_errno_exit_code(ENOENT), ExitCode::not_running);
  EXPECT_EQ(connect_errno_exit_code(ECONNREFUSED), ExitCode::not_running);
  EXPECT_EQ(connect_errno_exit_code(ENOTSOCK), ExitCode::not_running);
  EXPECT_EQ(connect_errno_exit_code(EACCES), ExitCode::permission_denied);
  EXPECT_EQ(connect_errno_exit_code(EPERM), ExitCode::permission_denied);
  EXPECT_EQ(connect_errno_exit_code(EAGAIN), ExitCode::timeout);
  EXPECT_EQ(connect_errno_exit_code(ETIMEDOUT), ExitCode::timeout);
}

TEST(ConnectErrno, MessagesSayWhatToDo) {
  EXPECT_EQ(connect_failure_message("/run/ferry/ferryd.sock", ENOENT, "ferry"),
            "cannot connect to /run/ferry/ferryd.sock: ferryd is not running (No such file or "
            "directory)");
  EXPECT_EQ(connect_failure_message("/run/ferry/ferryd.sock", ECONNREFUSED, "ferry"),
            "cannot connect to /run/ferry/ferryd.sock: ferryd is not running (Connection "
            "refused)");
  EXPECT_EQ(connect_failure_message("/run/ferry/ferryd.sock", EACCES, "ferry"),
            "cannot connect to /run/ferry/ferryd.sock: permission denied: add yourself to the "
            "socket's group (ferry) or run as root");
  EXPECT_EQ(connect_failure_message("/x", ENOTSOCK, "ferry"),
            "cannot connect to /x: Socket operation on non-socket");
}

TEST(ClientConnect, MissingSocketMeansFerrydIsNotRunning) {
  TempDir dir;
  std::string path = dir.path() + "/ferryd.sock";
  CtlError e = error_from([&] { Client::connect(path, 1000); });
  EXPECT_EQ(e.exit_code(), ExitCode::not_running);
  EXPECT_EQ(std::string(e.what()),
            "cannot connect to " + path + ": ferryd is not running (No such file or directory)");
}

TEST(ClientConnect, SocketNobodyListensOnMeansFerrydIsNotRunning) {
  TempDir dir;
  std::string path = dir.path() + "/ferryd.sock";
  // Bound but never listened on: what a crashed daemon leaves behind answers ECONNREFUSED.
  UniqueFd stale(::socket(AF_UNIX, SOCK_STREAM, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(stale.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  CtlError e = error_from([&] { Client::connect(path, 1000); });
  EXPECT_EQ(e.exit_code(), ExitCode::not_running);
  EXPECT_EQ(std::string(e.what()),
            "cannot connect to " + path + ": ferryd is not running (Connection refused)");
}

TEST(ClientConnect, SocketWithoutPermissionExits4NamingTheGroup) {
  if (::geteuid() == 0) {
    // Root ignores the socket's mode, so the kernel cannot refuse us here: pin the mapping that
    // an unprivileged operator's EACCES goes through instead.
    CtlError e = connect_failure("/run/ferry/ferryd.sock", EACCES, "ferry");
    EXPECT_EQ(e.exit_code(), ExitCode::permission_denied);
    EXPECT_STREQ(e.what(),
                 "cannot connect to /run/ferry/ferryd.sock: permission denied: add yourself to "
                 "the socket's group (ferry) or run as root");
    return;
  }
  FakeDaemon daemon([](const json&) { return ok_response({}); });
  ASSERT_EQ(::chmod(daemon.socket_path().c_str(), 0), 0);
  CtlError e = error_from([&] { Client::connect(daemon.socket_path(), 1000); });
  EXPECT_EQ(e.exit_code(), ExitCode::permission_denied);
  EXPECT_NE(std::string(e.what()).find(": permission denied: add yourself to the socket's group ("),
            std::string::npos)
      << e.what();
}

TEST(ClientConnect, RejectsPathsTooLongForAUnixSocket) {
  CtlError e = error_from([] { Client::connect("/" + std::string(200, 'x'), 1000); });
  EXPECT_EQ(e.exit_code(), ExitCode::usage);
}

TEST(ClientConnect, TalksToAListeningDaemon) {
  FakeDaemon daemon([](const json& request) { return ok_response(request["cmd"]); });
  Client client = Client::connect(daemon.socket_path(), 1000);
  EXPECT_EQ(client.call("status").result, "status");
  EXPECT_EQ(client.call("workers").result, "workers");
  EXPECT_EQ(daemon.connections(), 1);
}

// --- whole invocations ---------------------------------------------------------------------

struct Outcome {
  int exit_code;
  std::string out, err;
};

Outcome run_ferryctl(std::vector<std::string> args, const char* env_socket = nullptr) {
  std::ostringstream out, err;
  Terminal terminal{out, err};
  int code;
  try {
    Invocation inv = parse_command_line(args, env_socket);
    code = run(inv, terminal);
  } catch (const CtlError& e) {
    err << "ferryctl: " << e.what() << "\n";
    code = static_cast<int>(e.exit_code());
  }
  return {code, out.str(), err.str()};
}

const json kStatus = json::parse(R"({"version":"0.1.0","pid":1234,"state":"running",
  "uptime_seconds":12.5,"services":2})");

TEST(Run, StatusPrintsTheRenderedResult) {
  FakeDaemon daemon([](const json&) { return ok_response(kStatus); });
  Outcome o = run_ferryctl({"status", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, render_status(kStatus));
  EXPECT_EQ(o.err, "");
  ASSERT_EQ(daemon.requests().size(), 1u);
  EXPECT_EQ(daemon.requests()[0]["cmd"], "status");
  EXPECT_EQ(daemon.requests()[0]["args"], json::object());
}

TEST(Run, StatsSendsThePrefixAsArgs) {
  FakeDaemon daemon([](const json&) { return ok_response({{"metrics", json::array()}}); });
  Outcome o = run_ferryctl({"--socket=" + daemon.socket_path(), "stats", "ferry_xdp_"});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "no metrics\n");
  EXPECT_EQ(daemon.requests().at(0)["args"], json({{"prefix", "ferry_xdp_"}}));
}

TEST(Run, FerrySocketEnvironmentVariableNamesTheSocket) {
  FakeDaemon daemon([](const json&) {
    return ok_response({{"reloaded", true}, {"config_path", "/etc/f.json"}});
  });
  Outcome o = run_ferryctl({"reload"}, daemon.socket_path().c_str());
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out, "reloaded /etc/f.json\n");
}

TEST(Run, DaemonErrorPrintsCodeAndMessageAndExits1) {
  FakeDaemon daemon(
      [](const json&) { return error_response("bad_args", "prefix must be a string"); });
  Outcome o = run_ferryctl({"stats", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "ferryctl: bad_args: prefix must be a string\n");
}

TEST(Run, RejectedReloadPrintsTheDaemonsFileLineColumnMessage) {
  FakeDaemon daemon([](const json&) {
    return error_response("rejected", "/etc/ferry/ferryd.json:12:5: unknown key \"prot\"");
  });
  Outcome o = run_ferryctl({"reload", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_EQ(o.err,
            "ferryctl: rejected: /etc/ferry/ferryd.json:12:5: unknown key \"prot\"\n"
            "ferryctl: ferryd keeps running with its previous configuration\n");
}

TEST(Run, PermissionDeniedByFerrydExits4) {
  FakeDaemon daemon([](const json&) {
    return error_response("permission_denied", "'reload' needs admin access");
  });
  Outcome o = run_ferryctl({"reload", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 4);
  EXPECT_EQ(o.err, "ferryctl: permission_denied: 'reload' needs admin access\n");
}

TEST(Run, JsonPrintsTheWholeResponsePrettyAndExitsByOk) {
  FakeDaemon daemon([](const json& request) {
    if (request["cmd"] == "workers") return error_response("internal", "boom");
    return ok_response({{"services", json::array()}});
  });
  Outcome ok = run_ferryctl({"services", "--json", "--socket", daemon.socket_path()});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(
      ok.out,
      json({{"id", 1}, {"ok", true}, {"result", {{"services", json::array()}}}}).dump(2) + "\n");
  Outcome error = run_ferryctl({"--json", "workers", "--socket", daemon.socket_path()});
  EXPECT_EQ(error.exit_code, 1);
  EXPECT_EQ(json::parse(error.out)["error"]["code"], "internal");
  EXPECT_EQ(error.err, "");
}

TEST(Run, NoDaemonExits3) {
  TempDir dir;
  std::string path = dir.path() + "/ferryd.sock";
  Outcome o = run_ferryctl({"status", "--socket", path});
  EXPECT_EQ(o.exit_code, 3);
  EXPECT_EQ(o.err, "ferryctl: cannot connect to " + path +
                       ": ferryd is not running (No such file or directory)\n");
}

TEST(Run, SilentDaemonExits5AfterTheTimeout) {
  FakeDaemon daemon([](const json&) { return json(); });
  Outcome o = run_ferryctl({"status", "--timeout-ms", "30", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 5);
  EXPECT_EQ(o.err,
            "ferryctl: ferryd did not answer 'status' within 30 ms (is it stuck? raise "
            "--timeout-ms to wait longer)\n");
}

TEST(Run, MalformedAnswerExits5) {
  FakeDaemon daemon([](const json&) { return json("HTTP/1.1 400 Bad Request"); });
  Outcome o = run_ferryctl({"status", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 5);
  EXPECT_EQ(o.err,
            "ferryctl: malformed response from ferryd (not JSON): HTTP/1.1 400 Bad Request\n");
}

TEST(Run, HelpListsTheDaemonsCommands) {
  FakeDaemon daemon([](const json&) {
    return ok_response(json::parse(R"({"commands":[
      {"name":"reload","access":"admin","summary":"re-read the config file"},
      {"name":"status","access":"read","summary":"daemon state"}]})"));
  });
  Outcome o = run_ferryctl({"help", "--socket", daemon.socket_path()});
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_EQ(o.out,
            "COMMAND  ACCESS  SUMMARY\n"
            "reload   admin   re-read the config file\n"
            "status   read    daemon state\n");
  EXPECT_EQ(daemon.requests().at(0)["cmd"], "help");
}

TEST(Run, VersionAndUsageNeedNoDaemon) {
  Outcome version = run_ferryctl({"--version", "--socket", "/nonexistent/ferryd.sock"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, std::string("ferryctl ") + FERRY_VERSION + "\n");
  Outcome usage = run_ferryctl({"--help"});
  EXPECT_EQ(usage.exit_code, 0);
  EXPECT_EQ(usage.out, usage_text());
}

TEST(Run, UsageErrorsExit2) {
  Outcome o = run_ferryctl({"frobnicate"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_EQ(o.err, "ferryctl: unknown command 'frobnicate' (see ferryctl --help)\n");
}

}  // namespace
}  // namespace ferry::ctl
