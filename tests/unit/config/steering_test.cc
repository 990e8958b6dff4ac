// The config keys that steer balancing: weighted backend objects, a service's affinity and the
// flow table (xdp.flows); their defaults, every error with its line and column, and the round
// trip of to_json.
#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

// An error on line 1 at the first `token` of `text`.
#define EXPECT_ERROR_AT_TOKEN(text, token, msg)      \
  do {                                               \
    const std::string t = (text);                    \
    EXPECT_ERROR_AT(t, 1, column_of(t, token), msg); \
  } while (0)

// One service on one line with `backends` as given and `extra` keys spliced in.
std::string service_with(const std::string& backends, const std::string& extra = "") {
  return R"({"services": [{"name": "dns", "vip": "10.0.0.10", "port": 53, "backends": )" +
         backends + extra + "}]}";
}

Config round_trip(const Config& c) {
  return parse_config(to_json(c).dump(2), c.source_path);
}

TEST(ConfigBackendWeights, PlainStringsWeighOne) {
  Config c = parse_config(service_with(R"(["10.0.1.2:53", "10.0.1.3:53"])"), "f.json");
  const ServiceConfig& s = c.services[0];
  ASSERT_EQ(s.backends.size(), 2u);
  EXPECT_EQ(s.backend_weights, (std::vector<std::uint32_t>{1, 1}));
  EXPECT_EQ(s.weight(1), 1u);
}

TEST(ConfigBackendWeights, ObjectsAndStringsMixInConfigOrder) {
  Config c = parse_config(service_with(R"(["10.0.1.2:53", {"address": "10.0.1.3:53", "weight": 3},
      {"address": "10.0.1.4:53", "weight": 0}, {"address": "10.0.1.5:53"},
      {"weight": 256, "address": "10.0.1.6:53"}])"),
                          "f.json");
  const ServiceConfig& s = c.services[0];
  ASSERT_EQ(s.backends.size(), 5u);
  EXPECT_EQ(s.backends[1].to_string(), "10.0.1.3:53");
  EXPECT_EQ(s.backends[4].to_string(), "10.0.1.6:53");
  EXPECT_EQ(s.backend_weights, (std::vector<std::uint32_t>{1, 3, 0, 1, 256}));
}

TEST(ConfigBackendWeights, AHandBuiltServiceWithoutWeightsWeighsOne) {
  ServiceConfig s;
  s.backends.push_back(*net::Endpoint::parse("10.0.1.2:53"));
  EXPECT_EQ(s.weight(0), 1u);
}

TEST(ConfigBackendWeights, WeightOutOfRange) {
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2:53", "weight": 257}])"), "257",
                        "services[0].backends[0].weight: 257 is out of range (0..256)");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2:53", "weight": -1}])"), "-1",
                        "services[0].backends[0].weight: -1 is out of range (0..256)");
}

TEST(ConfigBackendWeights, WeightOfTheWrongType) {
  EXPECT_ERROR_AT_TOKEN(
      service_with(R"(["10.0.1.2:53", {"address": "10.0.1.3:53", "weight": "3"}])"), "\"3\"",
      "services[0].backends[1].weight: expected an integer (0..256), got the string '3'");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2:53", "weight": 1.5}])"), "1.5",
                        "services[0].backends[0].weight: 1.5 is not an integer");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2:53", "weight": null}])"), "null",
                        "services[0].backends[0].weight: expected an integer (0..256), got null");
}

TEST(ConfigBackendWeights, UnknownKeyInABackendObjectSuggestsTheKnownOne) {
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2:53", "wieght": 2}])"), "\"wieght\"",
                        "unknown key 'wieght' in services[0].backends[0] (did you mean 'weight'?)");
  EXPECT_ERROR_AT_TOKEN(
      service_with(R"([{"adress": "10.0.1.2:53"}])"), "\"adress\"",
      "unknown key 'adress' in services[0].backends[0] (did you mean 'address'?)");
  EXPECT_ERROR_AT_TOKEN(
      service_with(R"([{"address": "10.0.1.2:53", "backup": true}])"), "\"backup\"",
      "unknown key 'backup' in services[0].backends[0] (accepted: address, weight, "
      "server_id)");
}

TEST(ConfigBackendWeights, ABackendObjectNeedsAnAddress) {
  EXPECT_ERROR_AT_TOKEN(service_with(R"(["10.0.1.2:53", {"weight": 2}])"), "{\"weight\"",
                        "services[0].backends[1]: missing required key 'address'");
}

TEST(ConfigBackendWeights, AnEntryIsAStringOrAnObject) {
  EXPECT_ERROR_AT_TOKEN(service_with(R"(["10.0.1.2:53", 5])"), "5]",
                        "services[0].backends[1]: expected \"ADDRESS:PORT\" or {\"address\": "
                        "\"ADDRESS:PORT\", \"weight\": 0..256}, got 5");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([["10.0.1.2:53", 2]])"), R"(["10.0.1.2:53", 2])",
                        "services[0].backends[0]: expected \"ADDRESS:PORT\" or {\"address\": "
                        "\"ADDRESS:PORT\", \"weight\": 0..256}, got an array");
}

TEST(ConfigBackendWeights, TheAddressOfAnObjectIsCheckedLikeAString) {
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2", "weight": 2}])"), "\"10.0.1.2\"",
                        "services[0].backends[0].address: '10.0.1.2' is not ADDRESS:PORT (e.g. "
                        "\"127.0.0.1:9469\" or \"[::1]:9469\")");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": 53}])"), "53}",
                        "services[0].backends[0].address: expected a string \"ADDRESS:PORT\", "
                        "got 53");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "10.0.1.2:0"}])"), "\"10.0.1.2:0\"",
                        "services[0].backends[0].address: port 0 is not a backend port "
                        "(1..65535)");
  EXPECT_ERROR_AT_TOKEN(service_with(R"([{"address": "[2001:db8::2]:53"}])"), "\"[2001",
                        "services[0].backends[0].address: [2001:db8::2]:53 is IPv6 but the vip "
                        "10.0.0.10 is IPv4; a backend must have the vip's address family");
}

TEST(ConfigBackendWeights, DuplicatesAcrossBothFormsAreFound) {
  const std::string text =
      service_with(R"(["10.0.1.2:53", {"address": "10.0.1.2:53", "weight": 2}])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"10.0.1.2:53\", \"weight\"")) << e.what();
  EXPECT_EQ(e.message(),
            "services[0].backends[1].address: duplicate backend 10.0.1.2:53 (first "
            "listed at 1:" +
                std::to_string(column_of(text, "\"10.0.1.2:53\"")) + ")");
}

TEST(ConfigBackendWeights, AllBackendsAtWeightZeroIsAValidDrainedService) {
  Config c = parse_config(service_with(R"([{"address": "10.0.1.2:53", "weight": 0}])"), "f.json");
  EXPECT_EQ(c.services[0].backend_weights, (std::vector<std::uint32_t>{0}));
}

TEST(ConfigAffinity, DefaultsToFlowAndAcceptsNone) {
  Config c = parse_config(service_with(R"(["10.0.1.2:53"])"), "f.json");
  EXPECT_EQ(c.services[0].affinity, Affinity::flow);
  c = parse_config(service_with(R"(["10.0.1.2:53"])", R"(, "affinity": "none")"), "f.json");
  EXPECT_EQ(c.services[0].affinity, Affinity::none);
  // TCP ignores it, so a TCP service may carry it (a service often serves both protocols).
  c = parse_config(
      service_with(R"(["10.0.1.2:53"])", R"(, "protocols": ["tcp"], "affinity": "flow")"),
      "f.json");
  EXPECT_EQ(c.services[0].affinity, Affinity::flow);
}

TEST(ConfigAffinity, UnknownValueSuggestsTheClosest) {
  EXPECT_ERROR_AT_TOKEN(service_with(R"(["10.0.1.2:53"])", R"(, "affinity": "flows")"), "\"flows\"",
                        "services[0].affinity: 'flows' is not one of flow, none (did you mean "
                        "'flow'?)");
  EXPECT_ERROR_AT_TOKEN(service_with(R"(["10.0.1.2:53"])", R"(, "affinity": true)"), "true",
                        "services[0].affinity: expected a string, one of flow, none, got true");
}

TEST(ConfigFlowTable, Defaults) {
  Config c = parse_config("{}", "f.json");
  EXPECT_EQ(c.xdp.flows.entries, 65536u);
  EXPECT_EQ(c.xdp.flows.idle_timeout_ms, 30000u);
}

TEST(ConfigFlowTable, AcceptsZeroAndPowersOfTwoInRange) {
  Config c =
      parse_config(R"({"xdp": {"flows": {"entries": 0, "idle_timeout_ms": 1000}}})", "f.json");
  EXPECT_EQ(c.xdp.flows.entries, 0u);
  EXPECT_EQ(c.xdp.flows.idle_timeout_ms, 1000u);
  c = parse_config(R"({"xdp": {"flows": {"entries": 16777216, "idle_timeout_ms": 3600000}}})",
                   "f.json");
  EXPECT_EQ(c.xdp.flows.entries, 16777216u);
  EXPECT_EQ(c.xdp.flows.idle_timeout_ms, 3600000u);
  c = parse_config(R"({"xdp": {"flows": {"entries": 1}}})", "f.json");
  EXPECT_EQ(c.xdp.flows.entries, 1u);
}

TEST(ConfigFlowTable, Errors) {
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flows": {"entries": 100000}}})", "100000",
                        "xdp.flows.entries: 100000 is not a power of two (the flow table is a "
                        "power-of-two hash table; 0 turns it off)");
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flows": {"entries": 33554432}}})", "33554432",
                        "xdp.flows.entries: 33554432 is out of range (0..16777216)");
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flows": {"idle_timeout_ms": 999}}})", "999",
                        "xdp.flows.idle_timeout_ms: 999 is out of range (1000..3600000)");
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flows": {"idle_timeout_ms": 3600001}}})", "3600001",
                        "xdp.flows.idle_timeout_ms: 3600001 is out of range (1000..3600000)");
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flows": {"entires": 1024}}})", "\"entires\"",
                        "unknown key 'entires' in xdp.flows (did you mean 'entries'?)");
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flows": 65536}})", "65536",
                        "xdp.flows: expected an object {...}, got 65536");
  EXPECT_ERROR_AT_TOKEN(R"({"xdp": {"flow": {}}})", "\"flow\"",
                        "unknown key 'flow' in xdp (did you mean 'flows'?)");
}

TEST(ConfigSteeringToJson, PrintsEveryDefault) {
  Config c = parse_config(service_with(R"(["10.0.1.2:53"])"), "f.json");
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["xdp"]["flows"]["entries"], 65536);
  EXPECT_EQ(j["xdp"]["flows"]["idle_timeout_ms"], 30000);
  EXPECT_EQ(j["services"][0]["affinity"], "flow");
  EXPECT_EQ(j["services"][0]["backends"], nlohmann::json::array({"10.0.1.2:53"}));
}

TEST(ConfigSteeringToJson, WeightOneIsAStringOthersAreObjects) {
  Config c = parse_config(service_with(R"([{"address": "10.0.1.2:53", "weight": 1},
      {"address": "10.0.1.3:53", "weight": 0}, {"address": "10.0.1.4:53", "weight": 7}])"),
                          "f.json");
  EXPECT_EQ(to_json(c)["services"][0]["backends"], nlohmann::json::parse(R"([
      "10.0.1.2:53", {"address": "10.0.1.3:53", "weight": 0},
      {"address": "10.0.1.4:53", "weight": 7}])"));
}

TEST(ConfigSteeringToJson, RoundTripsWeightsAffinityAndFlows) {
  Config c = parse_config(R"({
    "xdp": { "flows": { "entries": 1024, "idle_timeout_ms": 120000 } },
    "services": [
      { "name": "quic", "vip": "10.0.0.10", "port": 443, "protocols": ["udp", "tcp"],
        "backends": ["10.0.1.2:443", { "address": "10.0.1.3:443", "weight": 3 },
                     { "address": "10.0.1.4:443", "weight": 0 },
                     { "address": "10.0.1.5:443", "weight": 256 }],
        "balance": "least_connections", "affinity": "none" },
      { "name": "dns", "vip": "10.0.0.10", "port": 53, "backends": ["10.0.2.2:53"] }
    ]
  })",
                          "steer.json");
  Config back = round_trip(c);
  EXPECT_EQ(back, c);
  EXPECT_EQ(back.services[0].backend_weights, (std::vector<std::uint32_t>{1, 3, 0, 256}));
  EXPECT_EQ(back.services[0].affinity, Affinity::none);
  EXPECT_EQ(back.services[1].affinity, Affinity::flow);
  EXPECT_EQ(back.xdp.flows.entries, 1024u);
  EXPECT_EQ(back.xdp.flows.idle_timeout_ms, 120000u);
}

TEST(ConfigSteeringEquality, NewFieldsTakePart) {
  const std::string text = service_with(R"(["10.0.1.2:53", "10.0.1.3:53"])");
  Config a = parse_config(text, "f.json");
  Config b = a;
  b.services[0].backend_weights[1] = 2;
  EXPECT_NE(a, b);
  b = a;
  b.services[0].affinity = Affinity::none;
  EXPECT_NE(a, b);
  b = a;
  b.xdp.flows.entries = 0;
  EXPECT_NE(a, b);
  b = a;
  b.xdp.flows.idle_timeout_ms = 1000;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace ferry::config
