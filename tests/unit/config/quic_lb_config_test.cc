// The QUIC-LB keys: "quic_lb" on UDP services and "server_id" on their backends. Every error
// points at the value to fix (FILE:LINE:COL); the key is never repeated, neither in errors nor in
// the effective config (to_json, what `ferryctl config` prints), which shows "(set)".
#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

constexpr const char* kKey = "8f95f09245765f80256934e50c66207f";

std::string service_with(const std::string& quic_lb, const std::string& backends,
                         const std::string& protocols = R"(["udp"])") {
  return R"({"services": [{"name": "h3", "vip": "10.0.0.13", "port": 443, "protocols": )" +
         protocols + R"(, "backends": )" + backends +
         (quic_lb.empty() ? "" : R"(, "quic_lb": )" + quic_lb) + "}]}";
}

std::string configs(const std::string& entries) {
  return R"({"configs": [)" + entries + "]}";
}

const std::string kTwoBackends =
    R"([{"address": "10.0.1.9:443", "server_id": "0001"}, {"address": "10.0.1.10:443", "server_id": "0002"}])";

TEST(ConfigQuicLb, ConfigurationsAndServerIdsAreRead) {
  Config c = parse_config(
      service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6, "key": null},
                              {"id": 1, "server_id_bytes": 2, "nonce_bytes": 14, "key": ")" +
                           std::string(kKey) + R"("})"),
                   kTwoBackends),
      "f.json");
  const ServiceConfig& s = c.services[0];
  ASSERT_TRUE(s.quic_lb);
  ASSERT_EQ(s.quic_lb->configs.size(), 2u);
  EXPECT_EQ(s.quic_lb->configs[0].id, 0);
  EXPECT_EQ(s.quic_lb->configs[0].server_id_bytes, 2);
  EXPECT_EQ(s.quic_lb->configs[0].nonce_bytes, 6);
  EXPECT_FALSE(s.quic_lb->configs[0].key);
  ASSERT_TRUE(s.quic_lb->configs[1].key);
  EXPECT_EQ((*s.quic_lb->configs[1].key)[0], 0x8f);
  EXPECT_EQ((*s.quic_lb->configs[1].key)[15], 0x7f);
  ASSERT_NE(s.server_id(0), nullptr);
  EXPECT_EQ(*s.server_id(1), (ServerId{0x00, 0x02}));
}

TEST(ConfigQuicLb, OffByDefaultAndNullIsOff) {
  Config c = parse_config(service_with("", R"(["10.0.1.9:443"])"), "f.json");
  EXPECT_FALSE(c.services[0].quic_lb);
  EXPECT_TRUE(c.services[0].backend_server_ids.empty());
  EXPECT_TRUE(to_json(c)["services"][0]["quic_lb"].is_null());
  EXPECT_EQ(to_json(c)["services"][0]["backends"][0], "10.0.1.9:443");
  c = parse_config(service_with("null", R"(["10.0.1.9:443"])"), "f.json");
  EXPECT_FALSE(c.services[0].quic_lb);
}

TEST(ConfigQuicLb, PlaintextConfigRoundTripsThroughTheEffectiveConfig) {
  Config c = parse_config(
      service_with(
          configs(R"({"id": 3, "server_id_bytes": 2, "nonce_bytes": 6})"),
          R"([{"address": "10.0.1.9:443", "server_id": "00AB", "weight": 3}, "10.0.1.10:443"])"),
      "f.json");
  nlohmann::json j = to_json(c);
  EXPECT_EQ(
      j["services"][0]["backends"][0],
      nlohmann::json::parse(R"({"address": "10.0.1.9:443", "weight": 3, "server_id": "00ab"})"));
  EXPECT_EQ(j["services"][0]["backends"][1], "10.0.1.10:443");
  EXPECT_EQ(
      j["services"][0]["quic_lb"],
      nlohmann::json::parse(
          R"({"configs": [{"id": 3, "server_id_bytes": 2, "nonce_bytes": 6, "key": null}]})"));
  EXPECT_EQ(parse_config(j.dump(), "g.json").services, c.services);
}

// The key is in no serialization of the config: "(set)" in its place.
TEST(ConfigQuicLb, TheKeyIsRedactedFromTheEffectiveConfig) {
  Config c = parse_config(
      service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 14, "key": ")" +
                           std::string(kKey) + R"("})"),
                   kTwoBackends),
      "f.json");
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["services"][0]["quic_lb"]["configs"][0]["key"], "(set)");
  const std::string text = j.dump();
  EXPECT_EQ(text.find(kKey), std::string::npos);
  EXPECT_EQ(text.find("8F95F092"), std::string::npos);
  EXPECT_EQ(text.find("8f95f092"), std::string::npos);
  // Saved as is, the effective config says where the key has to go back.
  std::string saved = j.dump();
  ConfigError e = error_of(saved);
  EXPECT_EQ(e.column(), column_of(saved, "\"(set)\""));
  EXPECT_EQ(e.message(),
            "services[0].quic_lb.configs[0].key: '(set)' is how ferryctl config shows a key it "
            "keeps secret; write the key's 32 hex digits here");
}

struct BadKey {
  const char* value;
  const char* message;
};

TEST(ConfigQuicLb, KeysThatAreNot32HexDigitsAreRefusedWithoutBeingRepeated) {
  const BadKey cases[] = {
      {"\"8f95f09245765f80256934e50c66207\"",
       "expected 32 hex digits (a 16-octet AES-128 key), got 31 characters"},
      {"\"8f95f09245765f80256934e50c66207f00\"",
       "expected 32 hex digits (a 16-octet AES-128 key), got 34 characters"},
      {"\"8f95f09245765f80256934e50c66207g\"",
       "expected 32 hex digits (a 16-octet AES-128 key), got 32 characters, not all of them hex "
       "digits"},
      {"\"8f95f092-45765f80-256934e5-0c66207f\"",
       "expected 32 hex digits (a 16-octet AES-128 key), got 35 characters, not all of them hex "
       "digits"},
      {"\"\"", "expected 32 hex digits (a 16-octet AES-128 key), got 0 characters"},
      {"16", "expected 32 hex digits (a 16-octet AES-128 key) or null, got 16"},
  };
  for (const auto& bad : cases) {
    std::string text =
        service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6, "key": )" +
                             std::string(bad.value) + "}"),
                     kTwoBackends);
    ConfigError e = error_of(text);
    EXPECT_EQ(e.line(), 1);
    EXPECT_EQ(e.column(), column_of(text, bad.value));
    EXPECT_EQ(e.message(), std::string("services[0].quic_lb.configs[0].key: ") + bad.message);
    EXPECT_EQ(std::string(e.what()).find("8f95f0924576"), std::string::npos) << e.what();
  }
}

struct BadConfig {
  const char* entry;  // one configs[] entry
  const char* at;     // the token the error points at
  const char* message;
};

TEST(ConfigQuicLb, LengthsAndIdsOutOfTheDraftsBoundsPointAtTheValue) {
  const BadConfig cases[] = {
      {R"({"id": 7, "server_id_bytes": 2, "nonce_bytes": 6})", "7",
       "configs[0].id: 7 (0b111) is the codepoint of unroutable connection IDs; use 0..6"},
      {R"({"id": 8, "server_id_bytes": 2, "nonce_bytes": 6})", "8",
       "configs[0].id: 8 is out of range (0..6)"},
      {R"({"id": -1, "server_id_bytes": 2, "nonce_bytes": 6})", "-1",
       "configs[0].id: -1 is out of range (0..6)"},
      {R"({"id": 0, "server_id_bytes": 0, "nonce_bytes": 6})", "0, \"nonce",
       "configs[0].server_id_bytes: 0 is out of range (1..15)"},
      {R"({"id": 0, "server_id_bytes": 16, "nonce_bytes": 4})", "16",
       "configs[0].server_id_bytes: 16 is out of range (1..15)"},
      {R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 3})", "3}",
       "configs[0].nonce_bytes: 3 is out of range (4..18)"},
      {R"({"id": 0, "server_id_bytes": 1, "nonce_bytes": 19})", "19",
       "configs[0].nonce_bytes: 19 is out of range (4..18)"},
      {R"({"id": 0, "server_id_bytes": 5, "nonce_bytes": 15})", "15",
       "configs[0].nonce_bytes: server_id_bytes + nonce_bytes is 5 + 15 = 20; at most 19 fit a "
       "20-octet connection ID"},
      {R"({"id": 0, "server_id_bytes": 2})", "{\"id\": 0",
       "configs[0]: missing required key 'nonce_bytes'"},
      {R"({"id": 0, "server_id_bytes": 2, "nonce_byte": 6})", "\"nonce_byte\"",
       "unknown key 'nonce_byte' in services[0].quic_lb.configs[0] (did you mean 'nonce_bytes'?)"},
  };
  for (const auto& bad : cases) {
    std::string text = service_with(configs(bad.entry), R"(["10.0.1.9:443"])");
    ConfigError e = error_of(text);
    std::string after_configs = text.substr(text.find("\"configs\""));
    EXPECT_EQ(e.column(),
              static_cast<int>(text.find("\"configs\"")) + column_of(after_configs, bad.at))
        << e.what();
    const std::string expected = std::string(bad.message).starts_with("unknown key")
                                     ? std::string(bad.message)
                                     : "services[0].quic_lb." + std::string(bad.message);
    EXPECT_EQ(e.message(), expected);
  }
}

TEST(ConfigQuicLb, DuplicateConfigIdsPointAtTheSecond) {
  std::string text = service_with(configs(R"({"id": 2, "server_id_bytes": 2, "nonce_bytes": 6},
                                             {"id": 2, "server_id_bytes": 3, "nonce_bytes": 6})"),
                                  R"(["10.0.1.9:443"])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.message(),
            "services[0].quic_lb.configs[1].id: duplicate config id 2 (first defined at " +
                std::to_string(1) + ":" +
                std::to_string(column_of(text, "2, \"server_id_bytes\"")) +
                "); each configuration needs its own codepoint 0..6");
}

TEST(ConfigQuicLb, EmptyConfigsIsAnError) {
  std::string text = service_with(R"({"configs": []})", R"(["10.0.1.9:443"])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "[]"));
  EXPECT_EQ(e.message(),
            "services[0].quic_lb.configs: needs at least one configuration; remove quic_lb (or set "
            "it to null) to turn it off");
}

TEST(ConfigQuicLb, TcpOnlyServicesRefuseQuicLb) {
  std::string text = service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6})"),
                                  R"(["10.0.1.9:443"])", R"(["tcp"])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "{\"configs\""));
  EXPECT_EQ(e.message(),
            "services[0].quic_lb: QUIC runs over UDP and this service serves TCP only; add \"udp\" "
            "to \"protocols\" or remove quic_lb");
  // A service with both protocols may use it for its UDP side.
  EXPECT_NO_THROW(
      parse_config(service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6})"),
                                R"(["10.0.1.9:443"])", R"(["udp", "tcp"])"),
                   "f.json"));
}

TEST(ConfigQuicLb, ReflectServicesRefuseQuicLb) {
  std::string text =
      R"({"services": [{"name": "m", "vip": "10.0.0.13", "port": 9, "mode": "reflect", "quic_lb": {"configs": [{"id": 0, "server_id_bytes": 2, "nonce_bytes": 6}]}}]})";
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "{\"configs\""));
  EXPECT_EQ(e.message(),
            "services[0].quic_lb: applies to UDP services in mode 'proxy', not mode 'reflect'; "
            "remove it");
}

TEST(ConfigQuicLb, ServerIdWithoutQuicLbIsAnError) {
  std::string text = service_with("", R"([{"address": "10.0.1.9:443", "server_id": "0001"}])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"0001\""));
  EXPECT_EQ(e.message(),
            "services[0].backends[0].server_id: a server ID needs the service's quic_lb section; "
            "add quic_lb or remove server_id");
}

TEST(ConfigQuicLb, ServerIdOfNoConfiguredLengthIsAnError) {
  std::string text = service_with(
      configs(
          R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6}, {"id": 1, "server_id_bytes": 3, "nonce_bytes": 6})"),
      R"([{"address": "10.0.1.9:443", "server_id": "00010203"}])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"00010203\""));
  EXPECT_EQ(e.message(),
            "services[0].backends[0].server_id: server ID 00010203 is 4 octets, but quic_lb's "
            "server_id_bytes are 2 (config 0), 3 (config 1)");
}

TEST(ConfigQuicLb, DuplicateServerIdsPointAtTheSecond) {
  std::string text = service_with(
      configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6})"),
      R"([{"address": "10.0.1.9:443", "server_id": "00ab"}, {"address": "10.0.1.10:443", "server_id": "00AB"}])");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"00AB\""));
  EXPECT_EQ(e.message(),
            "services[0].backends[1].server_id: duplicate server ID 00ab (first given "
            "at 1:" +
                std::to_string(column_of(text, "\"00ab\"")) + "); each backend needs its own");
}

TEST(ConfigQuicLb, ServerIdsThatAreNotHexOctetsAreRefused) {
  for (const char* bad :
       {"\"001\"", "\"00zz\"", "\"\"", "\"00112233445566778899aabbccddeeff\"", "1"}) {
    std::string text =
        service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6})"),
                     R"([{"address": "10.0.1.9:443", "server_id": )" + std::string(bad) + "}]");
    ConfigError e = error_of(text);
    EXPECT_EQ(e.column(), column_of(text, std::string(": ") + bad) + 2) << e.what();
    EXPECT_TRUE(e.message().starts_with("services[0].backends[0].server_id: ")) << e.what();
  }
}

// Backends without a server ID are allowed: they get only the packets that fall back.
TEST(ConfigQuicLb, BackendsWithoutServerIdsAreAllowed) {
  Config c = parse_config(
      service_with(configs(R"({"id": 0, "server_id_bytes": 2, "nonce_bytes": 6})"),
                   R"(["10.0.1.8:443", {"address": "10.0.1.9:443", "server_id": "0001"}])"),
      "f.json");
  EXPECT_EQ(c.services[0].server_id(0), nullptr);
  ASSERT_NE(c.services[0].server_id(1), nullptr);
}

}  // namespace
}  // namespace ferry::config
