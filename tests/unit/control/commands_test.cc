// The command table, the access policy and dispatch: the request boundary of the control plane.
#include "lib/control/commands.hh"

#include <gtest/gtest.h>

#include <stdexcept>

#include "lib/control/protocol.hh"

namespace ferry::control {
namespace {

using nlohmann::json;

constexpr uid_t kDaemonUid = 990;
constexpr uid_t kOtherUid = 1234;

Peer unix_peer(uid_t uid) {
  return Peer{.pid = 4242, .uid = uid, .gid = uid, .tcp = false};
}

TEST(AccessPolicy, ReadIsOpenToEveryPeer) {
  AccessPolicy policy(kDaemonUid);
  for (const Peer& peer : {unix_peer(0), unix_peer(kDaemonUid), unix_peer(kOtherUid),
                           Peer{.pid = 0, .uid = kOtherUid, .gid = 0, .tcp = true}}) {
    EXPECT_TRUE(policy.allows(peer, Access::read)) << peer.uid;
  }
}

TEST(AccessPolicy, AdminNeedsRootTheDaemonUidOrTcpToken) {
  AccessPolicy policy(kDaemonUid);
  EXPECT_TRUE(policy.allows(unix_peer(0), Access::admin));
  EXPECT_TRUE(policy.allows(unix_peer(kDaemonUid), Access::admin));
  EXPECT_FALSE(policy.allows(unix_peer(kOtherUid), Access::admin));
  EXPECT_TRUE(
      policy.allows(Peer{.pid = 0, .uid = kOtherUid, .gid = 0, .tcp = true}, Access::admin));

  AccessPolicy root_daemon(0);
  EXPECT_TRUE(root_daemon.allows(unix_peer(0), Access::admin));
  EXPECT_FALSE(root_daemon.allows(unix_peer(kDaemonUid), Access::admin));
}

TEST(CommandTable, FindsWhatWasAdded) {
  CommandTable table;
  table.add("status", Access::read, "show status",
            [](const json&, const Peer&) { return json(1); });
  const Command* status = table.find("status");
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(status->access, Access::read);
  EXPECT_EQ(status->summary, "show status");
  EXPECT_EQ(status->handler(json::object(), Peer{}), 1);
  EXPECT_EQ(table.find("reload"), nullptr);
  EXPECT_EQ(table.all().size(), 1u);
}

TEST(CommandTable, RefusesDuplicateAndMalformedNames) {
  CommandTable table;
  auto handler = [](const json&, const Peer&) { return json::object(); };
  table.add("status", Access::read, "", handler);
  EXPECT_THROW(table.add("status", Access::admin, "", handler), std::invalid_argument);
  EXPECT_THROW(table.add("Status", Access::read, "", handler), std::invalid_argument);
  EXPECT_THROW(table.add("", Access::read, "", handler), std::invalid_argument);
  EXPECT_THROW(table.add("empty", Access::read, "", Handler{}), std::invalid_argument);
}

class Dispatch : public ::testing::Test {
 protected:
  Dispatch() {
    table_.add("echo", Access::read, "returns its args and who asked",
               [](const json& args, const Peer& peer) {
                 return json{{"args", args}, {"uid", peer.uid}, {"tcp", peer.tcp}};
               });
    table_.add("reload", Access::admin, "reload the config", [](const json&, const Peer&) {
      return json{{"reloaded", true}};
    });
    table_.add("strict", Access::read, "", [](const json& args, const Peer&) -> json {
      throw CommandError("bad_args", "unknown argument '" + args.begin().key() + "'");
    });
    table_.add("broken", Access::read, "", [](const json&, const Peer&) -> json {
      throw std::runtime_error("map lookup failed");
    });
    table_.add("weird", Access::read, "", [](const json&, const Peer&) -> json { throw 42; });
  }

  json run(std::string_view line, const Peer& peer, DispatchOutcome* outcome = nullptr) {
    DispatchOutcome local;
    std::string response = dispatch(table_, policy_, peer, line, outcome ? *outcome : local);
    EXPECT_EQ(response.find('\n'), std::string::npos);
    return json::parse(response);
  }

  CommandTable table_;
  AccessPolicy policy_{kDaemonUid};
};

TEST_F(Dispatch, RunsTheHandlerWithArgsAndPeer) {
  DispatchOutcome outcome;
  json r = run(R"({"id":1,"cmd":"echo","args":{"x":2}})", unix_peer(kOtherUid), &outcome);
  EXPECT_EQ(r, (json{{"id", 1},
                     {"ok", true},
                     {"result", {{"args", {{"x", 2}}}, {"uid", kOtherUid}, {"tcp", false}}}}));
  EXPECT_EQ(outcome.cmd, "echo");
  EXPECT_TRUE(outcome.ok);
  EXPECT_EQ(outcome.error_code, "");
}

TEST_F(Dispatch, UnknownCommandPointsAtHelp) {
  DispatchOutcome outcome;
  json r = run(R"({"id":2,"cmd":"frobnicate"})", unix_peer(0), &outcome);
  EXPECT_EQ(r["id"], 2);
  EXPECT_EQ(r["ok"], false);
  EXPECT_EQ(r["error"]["code"], "unknown_command");
  EXPECT_EQ(r["error"]["message"], "unknown command 'frobnicate'; try 'help'");
  EXPECT_EQ(outcome.cmd, "");
  EXPECT_FALSE(outcome.ok);
  EXPECT_EQ(outcome.error_code, "unknown_command");
}

TEST_F(Dispatch, DeniesAdminToOtherUidsNamingTheRule) {
  DispatchOutcome outcome;
  json r = run(R"({"id":3,"cmd":"reload"})", unix_peer(kOtherUid), &outcome);
  EXPECT_EQ(r["id"], 3);
  EXPECT_EQ(r["error"]["code"], "permission_denied");
  std::string message = r["error"]["message"];
  EXPECT_NE(message.find("uid 1234"), std::string::npos) << message;
  EXPECT_NE(message.find("root or the daemon's uid"), std::string::npos) << message;
  EXPECT_EQ(outcome.cmd, "reload");
  EXPECT_EQ(outcome.error_code, "permission_denied");

  EXPECT_EQ(run(R"({"cmd":"reload"})", unix_peer(kDaemonUid))["ok"], true);
  EXPECT_EQ(run(R"({"cmd":"reload"})", Peer{.tcp = true})["ok"], true);
}

TEST_F(Dispatch, HandlerCommandErrorKeepsItsCode) {
  json r = run(R"({"id":4,"cmd":"strict","args":{"colour":"red"}})", unix_peer(0));
  EXPECT_EQ(r, (json{{"id", 4},
                     {"ok", false},
                     {"error", {{"code", "bad_args"}, {"message", "unknown argument 'colour'"}}}}));
}

TEST_F(Dispatch, OtherExceptionsBecomeInternalWithTheirMessage) {
  DispatchOutcome outcome;
  json r = run(R"({"id":5,"cmd":"broken"})", unix_peer(0), &outcome);
  EXPECT_EQ(r["error"]["code"], "internal");
  EXPECT_EQ(r["error"]["message"], "map lookup failed");
  EXPECT_EQ(outcome.cmd, "broken");
  EXPECT_EQ(outcome.error_code, "internal");

  json weird = run(R"({"id":6,"cmd":"weird"})", unix_peer(0));
  EXPECT_EQ(weird["id"], 6);
  EXPECT_EQ(weird["error"]["code"], "internal");
}

TEST_F(Dispatch, EnvelopeErrorsAreBadRequestsWithTheRecoveredId) {
  DispatchOutcome outcome;
  json r = run("{\"id\":8,\"cmd\":\"echo\",\"bogus\":1}", unix_peer(0), &outcome);
  EXPECT_EQ(r["id"], 8);
  EXPECT_EQ(r["error"]["code"], "bad_request");
  EXPECT_EQ(outcome.error_code, "bad_request");

  json garbage = run("\x01\xff garbage", unix_peer(0));
  EXPECT_TRUE(garbage["id"].is_null());
  EXPECT_EQ(garbage["error"]["code"], "bad_request");
}

TEST(HelpCommand, ListsEveryCommandWithAccessAndSummary) {
  CommandTable table;
  table.add("reload", Access::admin, "reload the configuration",
            [](const json&, const Peer&) { return json::object(); });
  add_help_command(table);
  table.add("status", Access::read, "show the daemon's state",
            [](const json&, const Peer&) { return json::object(); });

  json r = json::parse(dispatch(table, AccessPolicy(0), Peer{.uid = 1000}, R"({"cmd":"help"})"));
  EXPECT_EQ(
      r["result"],
      (json{{"commands",
             {{{"name", "help"},
               {"access", "read"},
               {"summary", "list the commands, their access level and what they do"}},
              {{"name", "reload"}, {"access", "admin"}, {"summary", "reload the configuration"}},
              {{"name", "status"}, {"access", "read"}, {"summary", "show the daemon's state"}}}}}));
}

}  // namespace
}  // namespace ferry::control
