// The announce section: off when absent or null, its defaults, every bound with the key's
// position, the kernel's own tables refused, min_backends checked against every proxy service
// (FILE:LINE:COL at min_backends), and the round trip of to_json.
#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

// A config on one line: `announce` as given (no key when empty) and two backends on "web".
std::string with_announce(const std::string& announce, const std::string& services = "") {
  std::string s = services.empty()
                      ? R"([{"name": "web", "vip": "10.0.0.10", "port": 80, "protocols": ["tcp"], )"
                        R"("backends": ["10.0.1.2:80", "10.0.1.3:80"]}])"
                      : services;
  return R"({"services": )" + s + (announce.empty() ? "" : R"(, "announce": )" + announce) + "}";
}

Config round_trip(const Config& c) {
  return parse_config(to_json(c).dump(2), c.source_path);
}

#define EXPECT_ERROR_AT_TOKEN(text, token, msg)      \
  do {                                               \
    const std::string t = (text);                    \
    EXPECT_ERROR_AT(t, 1, column_of(t, token), msg); \
  } while (0)

TEST(ConfigAnnounce, AbsentOrNullIsOff) {
  EXPECT_FALSE(parse_config(with_announce(""), "f.json").announce);
  EXPECT_FALSE(parse_config(with_announce("null"), "f.json").announce);
  EXPECT_FALSE(parse_config("{}", "f.json").announce);
  EXPECT_TRUE(to_json(parse_config("{}", "f.json"))["announce"].is_null());
}

TEST(ConfigAnnounce, AnEmptyObjectIsOnWithTheDefaults) {
  Config c = parse_config(with_announce("{}"), "f.json");
  ASSERT_TRUE(c.announce);
  EXPECT_EQ(c.announce->table, 100u);
  EXPECT_EQ(c.announce->min_backends, 1u);
  EXPECT_EQ(c.announce->withdraw_grace_ms, 1000u);
  EXPECT_EQ(*c.announce, AnnounceConfig{});
}

TEST(ConfigAnnounce, ReadsEveryKey) {
  Config c = parse_config(
      with_announce(R"({"table": 4000, "min_backends": 2, "withdraw_grace_ms": 0})"), "f.json");
  ASSERT_TRUE(c.announce);
  EXPECT_EQ(c.announce->table, 4000u);
  EXPECT_EQ(c.announce->min_backends, 2u);
  EXPECT_EQ(c.announce->withdraw_grace_ms, 0u);
}

TEST(ConfigAnnounce, AcceptsTheBoundsOfEveryKey) {
  for (const char* table : {"1", "252", "256", "4294967295"}) {
    Config c = parse_config(with_announce(std::string(R"({"table": )") + table + "}"), "f.json");
    EXPECT_EQ(c.announce->table, std::stoul(table));
  }
  Config c =
      parse_config(with_announce(R"({"withdraw_grace_ms": 60000, "min_backends": 1})"), "f.json");
  EXPECT_EQ(c.announce->withdraw_grace_ms, 60000u);
}

TEST(ConfigAnnounce, TableZeroAndOutOfRangeAreRefusedAtTheValue) {
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"table": 0})"), "0}",
                        "announce.table: 0 is out of range (1..4294967295)");
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"table": 4294967296})"), "4294967296",
                        "announce.table: 4294967296 is out of range (1..4294967295)");
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"table": -1})"), "-1",
                        "announce.table: -1 is out of range (1..4294967295)");
  std::string text = with_announce(R"({"table": "100"})");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"100\""));
  EXPECT_TRUE(e.message().starts_with("announce.table: expected an integer")) << e.what();
}

TEST(ConfigAnnounce, TheKernelsOwnTablesAreRefused) {
  for (auto [number, name] : {std::pair{"253", "default"}, {"254", "main"}, {"255", "local"}}) {
    EXPECT_ERROR_AT_TOKEN(with_announce(std::string(R"({"table": )") + number + "}"),
                          std::string(number) + "}",
                          std::string("announce.table: ") + number + " is the kernel's " + name +
                              " table; use a table of ferry's own (e.g. 100) that the routing "
                              "daemon learns from");
  }
}

TEST(ConfigAnnounce, MinBackendsAndGraceBounds) {
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"min_backends": 0})"), "0}",
                        "announce.min_backends: 0 is out of range (1..65536)");
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"min_backends": 65537})"), "65537",
                        "announce.min_backends: 65537 is out of range (1..65536)");
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"withdraw_grace_ms": 60001})"), "60001",
                        "announce.withdraw_grace_ms: 60001 is out of range (0..60000)");
  EXPECT_ERROR_AT_TOKEN(with_announce(R"({"withdraw_grace_ms": 1.5})"), "1.5",
                        "announce.withdraw_grace_ms: 1.5 is not an integer");
}

TEST(ConfigAnnounce, MinBackendsAboveAProxyServicesBackendCountPointsAtMinBackends) {
  std::string text = with_announce(R"({"table": 100, "min_backends": 3})");
  EXPECT_ERROR_AT(text, 1, column_of(text, "3}"),
                  "announce.min_backends: 3 is more than service 'web' has backends of weight "
                  "above 0 (2): its VIP "
                  "10.0.0.10 would never be announced");
  EXPECT_NO_THROW(parse_config(with_announce(R"({"min_backends": 2})"), "f.json"));
}

TEST(ConfigAnnounce, TheFirstServiceShortOfBackendsIsNamedOnItsLine) {
  std::string text =
      "{\n"
      "  \"services\": [\n"
      "    {\"name\": \"a\", \"vip\": \"10.0.0.10\", \"port\": 80, \"protocols\": [\"tcp\"],\n"
      "     \"backends\": [\"10.0.1.2:80\", \"10.0.1.3:80\"]},\n"
      "    {\"name\": \"b\", \"vip\": \"10.0.0.20\", \"port\": 80, \"protocols\": [\"tcp\"],\n"
      "     \"backends\": [\"10.0.1.2:80\"]}\n"
      "  ],\n"
      "  \"announce\": {\n"
      "    \"table\": 100,\n"
      "      \"min_backends\": 2\n"
      "  }\n"
      "}\n";
  EXPECT_ERROR_AT(text, 10, 23,
                  "announce.min_backends: 2 is more than service 'b' has backends of weight above "
                  "0 (1): its VIP "
                  "10.0.0.20 would never be announced");
}

TEST(ConfigAnnounce, EchoServicesNeedNoBackendsForMinBackends) {
  std::string services =
      R"([{"name": "echo", "vip": "10.0.0.10", "port": 7, "protocols": ["tcp"], "mode": "echo"}])";
  Config c = parse_config(with_announce(R"({"min_backends": 5})", services), "f.json");
  EXPECT_EQ(c.announce->min_backends, 5u);
}

TEST(ConfigAnnounce, UnknownKeysAreRefused) {
  std::string text = with_announce(R"({"tabel": 100})");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), column_of(text, "\"tabel\""));
  EXPECT_EQ(e.message(), "unknown key 'tabel' in announce (did you mean 'table'?)") << e.what();
}

TEST(ConfigAnnounce, MustBeAnObjectOrNull) {
  for (const char* bad : {"true", "100", "[]", "\"on\""}) {
    std::string text = with_announce(bad);
    ConfigError e = error_of(text);
    EXPECT_EQ(e.column(), column_of(text, std::string(": ") + bad) + 2) << e.what();
    EXPECT_TRUE(e.message().starts_with("announce: ")) << e.what();
  }
}

TEST(ConfigAnnounce, ToJsonWritesEveryKeyAndParsesBack) {
  Config c = parse_config(
      with_announce(R"({"table": 4000, "min_backends": 2, "withdraw_grace_ms": 250})"), "f.json");
  nlohmann::json j = to_json(c)["announce"];
  EXPECT_EQ(j["table"], 4000);
  EXPECT_EQ(j["min_backends"], 2);
  EXPECT_EQ(j["withdraw_grace_ms"], 250);
  EXPECT_EQ(round_trip(c), c);
  Config defaults = parse_config(with_announce("{}"), "f.json");
  nlohmann::json d = to_json(defaults)["announce"];
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["table"], 100);
  EXPECT_EQ(d["min_backends"], 1);
  EXPECT_EQ(d["withdraw_grace_ms"], 1000);
  EXPECT_EQ(round_trip(defaults), defaults);
  Config off = parse_config(with_announce(""), "f.json");
  EXPECT_EQ(round_trip(off), off);
  EXPECT_NE(off, defaults);  // on with the defaults is not off
}

}  // namespace
}  // namespace ferry::config
