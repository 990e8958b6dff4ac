// Schema validation of parse_config: defaults, every error class with its exact line and column,
// and messages that name the key path and what is accepted.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

// Joins lines with '\n' so that the line numbers of a test's config are easy to read.
std::string lines(std::initializer_list<const char*> ls) {
  std::string out;
  for (const char* l : ls) {
    out += l;
    out += '\n';
  }
  return out;
}

// A valid service block with one backend, with `extra` spliced in as further keys.
std::string service(const std::string& extra = "") {
  return R"({"name": "dns", "vip": "10.0.0.10", "port": 53, "backends": ["10.0.1.2:53"])" + extra +
         "}";
}

TEST(ConfigValidate, EmptyObjectIsTheDefaultConfig) {
  Config c = parse_config("{}", "f.json");
  Config defaults;
  defaults.source_path = "f.json";
  EXPECT_EQ(c, defaults);
  EXPECT_EQ(c.control.socket, "/run/ferry/ferryd.sock");
  EXPECT_EQ(c.control.mode, 0660u);
  EXPECT_EQ(c.control.group, "ferry");
  EXPECT_FALSE(c.control.tcp.listen);
  EXPECT_EQ(c.metrics.listen->to_string(), "127.0.0.1:9469");
  EXPECT_EQ(c.log.level, "info");
  EXPECT_EQ(c.xdp.umem.frames, 16384u);
  EXPECT_EQ(c.xdp.rings.fill, 4096u);
  EXPECT_EQ(c.tcp.workers, 2u);
  EXPECT_EQ(c.tcp.buffers.count, 256u);
  EXPECT_EQ(c.tcp.scheduler.io_ready, IoReadyMode::inbox);
  EXPECT_TRUE(c.services.empty());
}

TEST(ConfigValidate, ControlAndMetricsAloneAreAValidIdleDaemon) {
  Config c = parse_config(lines({
                              "{",
                              "  // an idle daemon: control socket and metrics only",
                              "  \"control\": { \"socket\": \"/tmp/f.sock\", \"mode\": \"0600\",",
                              "               \"group\": null },",
                              "  \"metrics\": { \"listen\": null }",
                              "}",
                          }),
                          "f.json");
  EXPECT_EQ(c.control.socket, "/tmp/f.sock");
  EXPECT_EQ(c.control.mode, 0600u);
  EXPECT_FALSE(c.control.group);
  EXPECT_FALSE(c.metrics.listen);
}

TEST(ConfigValidate, ReadsAFullServiceWithEveryKey) {
  Config c = parse_config(lines({
                              "{",
                              "  \"services\": [",
                              "    { \"name\": \"dns\", \"vip\": \"2001:db8::10\", \"port\": 53,",
                              "      \"protocols\": [\"tcp\", \"udp\"],",
                              "      \"backends\": [\"[2001:db8::2]:53\", \"[2001:db8::3]:5353\"],",
                              "      \"balance\": \"least_connections\", \"mode\": \"proxy\",",
                              "      \"health\": { \"interval_ms\": 2000, \"timeout_ms\": 1999, "
                              "\"rise\": 1, \"fall\": 100 } }",
                              "  ]",
                              "}",
                          }),
                          "f.json");
  ASSERT_EQ(c.services.size(), 1u);
  const ServiceConfig& s = c.services[0];
  EXPECT_EQ(s.name, "dns");
  EXPECT_EQ(s.vip.to_string(), "2001:db8::10");
  EXPECT_EQ(s.port, 53);
  EXPECT_TRUE(s.protocols.udp);
  EXPECT_TRUE(s.protocols.tcp);
  ASSERT_EQ(s.backends.size(), 2u);
  EXPECT_EQ(s.backends[1].to_string(), "[2001:db8::3]:5353");
  EXPECT_EQ(s.balance, BalancePolicy::least_connections);
  ASSERT_TRUE(s.health);
  EXPECT_EQ(s.health->interval_ms, 2000u);
  EXPECT_EQ(s.health->timeout_ms, 1999u);
  EXPECT_EQ(s.health->rise, 1u);
  EXPECT_EQ(s.health->fall, 100u);
}

TEST(ConfigValidate, ServiceDefaultsAreUdpMaglevProxyWithoutHealthChecks) {
  Config c = parse_config(R"({"services": [)" + service() + "]}", "f.json");
  const ServiceConfig& s = c.services[0];
  EXPECT_EQ(s.protocols, (Protocols{.udp = true, .tcp = false}));
  EXPECT_EQ(s.balance, BalancePolicy::maglev);
  EXPECT_EQ(s.mode, ServiceMode::proxy);
  EXPECT_FALSE(s.health);
}

TEST(ConfigValidate, EmptyHealthObjectEnablesChecksWithDefaultsAndNullDisablesThem) {
  Config c = parse_config(R"({"services": [)" + service(R"(, "health": {})") + "]}", "f.json");
  ASSERT_TRUE(c.services[0].health);
  EXPECT_EQ(*c.services[0].health, HealthCheckConfig{});
  c = parse_config(R"({"services": [)" + service(R"(, "health": null)") + "]}", "f.json");
  EXPECT_FALSE(c.services[0].health);
}

TEST(ConfigValidate, PortOutOfRangeNamesThePathAndTheRange) {
  std::string text = lines({
      "{",
      "  \"services\": [",
      "    { \"name\": \"a\", \"vip\": \"10.0.0.10\", \"port\": 53, \"backends\": "
      "[\"10.0.1.2:53\"] },",
      "    { \"name\": \"b\", \"vip\": \"10.0.0.10\",",
      "      \"port\": 70000, \"backends\": [\"10.0.1.2:53\"] }",
      "  ]",
      "}",
  });
  ConfigError e = error_of(text);
  EXPECT_EQ(e.line(), 5);
  EXPECT_EQ(e.column(), 15);
  EXPECT_EQ(e.message(), "services[1].port: 70000 is out of range (1..65535)");
  EXPECT_STREQ(e.what(), "f.json:5:15: services[1].port: 70000 is out of range (1..65535)");
}

TEST(ConfigValidate, UnknownKeySuggestsTheClosestKnownKey) {
  std::string text = lines({
      "{ \"services\": [",
      "  { \"name\": \"dns\", \"vip\": \"10.0.0.10\", \"port\": 53, \"bakends\": [] } ] }",
  });
  EXPECT_ERROR_AT(text, 2, 52, "unknown key 'bakends' in services[0] (did you mean 'backends'?)");
}

TEST(ConfigValidate, UnknownKeyWithoutACloseMatchListsTheAcceptedKeys) {
  EXPECT_ERROR_AT(R"({"xdp": {"umem": {"size": 1}}})", 1, 19,
                  "unknown key 'size' in xdp.umem (accepted: frames, frame_bytes)");
  EXPECT_ERROR_AT(R"({"servics": []})", 1, 2,
                  "unknown key 'servics' at the top level (did you mean 'services'?)");
  EXPECT_ERROR_AT(R"({"control": {"sokcet": "/x"}})", 1, 14,
                  "unknown key 'sokcet' in control (did you mean 'socket'?)");
}

TEST(ConfigValidate, TopLevelMustBeAnObject) {
  EXPECT_ERROR_AT("  [1]", 1, 3, "the config must be a JSON object, got an array");
}

TEST(ConfigValidate, WrongTypesSayWhatIsExpected) {
  std::string text =
      R"({"services": [)" + service() + "," + R"({"name": "b", "vip": "10.0.0.1", "port": "53"}]})";
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("53"})"),
                  "services[1].port: expected an integer (1..65535), got the string '53'");
  EXPECT_ERROR_AT(R"({"tcp": {"workers": 2.5}})", 1, 21, "tcp.workers: 2.5 is not an integer");
  EXPECT_ERROR_AT(R"({"tcp": {"workers": 1e3}})", 1, 21,
                  "tcp.workers: 1e3 is out of range (1..256)");
  EXPECT_ERROR_AT(R"({"tcp": {"workers": 0}})", 1, 21, "tcp.workers: 0 is out of range (1..256)");
  EXPECT_ERROR_AT(R"({"tcp": {"workers": 99999999999999999999}})", 1, 21,
                  "tcp.workers: 99999999999999999999 is out of range (1..256)");
  EXPECT_ERROR_AT(R"({"tcp": []})", 1, 9, "tcp: expected an object {...}, got an array");
  EXPECT_ERROR_AT(R"({"services": {}})", 1, 14,
                  "services: expected an array of service objects, got an object");
  EXPECT_ERROR_AT(
      R"({"log": {"level": 3}})", 1, 19,
      "log.level: expected a string, one of debug, info, notice, warning, error, got 3");
  EXPECT_ERROR_AT(R"({"metrics": {"listen": true}})", 1, 24,
                  "metrics.listen: expected a string \"ADDRESS:PORT\" or null, got true");
}

TEST(ConfigValidate, EnumValueTyposSuggestTheClosestChoice) {
  EXPECT_ERROR_AT(R"({"log": {"level": "warn"}})", 1, 19,
                  "log.level: 'warn' is not one of debug, info, notice, warning, error "
                  "(did you mean 'warning'?)");
  EXPECT_ERROR_AT(R"({"tcp": {"scheduler": {"io_ready": "steal"}}})", 1, 36,
                  "tcp.scheduler.io_ready: 'steal' is not one of inbox, global, index");
  EXPECT_ERROR_AT(R"({"tcp": {"buffers": {"bundle": "yes"}}})", 1, 32,
                  "tcp.buffers.bundle: 'yes' is not one of auto, on, off");
}

TEST(ConfigValidate, SizesMustBePowersOfTwoInRange) {
  EXPECT_ERROR_AT(R"({"xdp": {"umem": {"frames": 1000}}})", 1, 29,
                  "xdp.umem.frames: 1000 is not a power of two");
  EXPECT_ERROR_AT(R"({"xdp": {"umem": {"frames": 32}}})", 1, 29,
                  "xdp.umem.frames: 32 is out of range (64..1048576)");
  EXPECT_ERROR_AT(R"({"xdp": {"umem": {"frame_bytes": 3000}}})", 1, 34,
                  "xdp.umem.frame_bytes: 3000 must be 2048 or 4096");
  EXPECT_ERROR_AT(R"({"xdp": {"rings": {"tx": 131072}}})", 1, 26,
                  "xdp.rings.tx: 131072 is out of range (64..65536)");
  EXPECT_ERROR_AT(R"({"xdp": {"rings": {"completion": 100}}})", 1, 34,
                  "xdp.rings.completion: 100 is not a power of two");
  EXPECT_ERROR_AT(R"({"tcp": {"buffers": {"count": 3}}})", 1, 31,
                  "tcp.buffers.count: 3 is not a power of two");
  EXPECT_ERROR_AT(R"({"tcp": {"buffers": {"bytes": 256}}})", 1, 31,
                  "tcp.buffers.bytes: 256 is out of range (512..1048576)");
  Config c = parse_config(R"({"tcp": {"buffers": {"count": 1, "bytes": 1000}}})", "f.json");
  EXPECT_EQ(c.tcp.buffers.count, 1u);
  EXPECT_EQ(c.tcp.buffers.bytes, 1000u);
}

TEST(ConfigValidate, RecvCreditMustFitTheRing) {
  EXPECT_ERROR_AT(R"({"tcp": {"buffers": {"recv_credit_bytes": 100}}})", 1, 43,
                  "tcp.buffers.recv_credit_bytes: 100 is below 512 (0 turns the credit off)");
  EXPECT_ERROR_AT(
      R"({"tcp": {"buffers": {"count": 16, "bytes": 4096, "recv_credit_bytes": 131072}}})", 1, 71,
      "tcp.buffers.recv_credit_bytes: 131072 is more than the ring holds (count x bytes = "
      "65536)");
  EXPECT_ERROR_AT(R"({"tcp": {"buffers": {"recv_credit_idle_ms": 0}}})", 1, 45,
                  "tcp.buffers.recv_credit_idle_ms: 0 is out of range (1..60000)");
  Config off = parse_config(R"({"tcp": {"buffers": {"recv_credit_bytes": 0}}})", "f.json");
  EXPECT_EQ(off.tcp.buffers.recv_credit_bytes, 0u);
  // The default (64 KiB) is clamped to a smaller ring at run time, not refused.
  Config small = parse_config(R"({"tcp": {"buffers": {"count": 1, "bytes": 512}}})", "f.json");
  EXPECT_EQ(small.tcp.buffers.recv_credit_bytes, 65536u);
}

TEST(ConfigValidate, MissingRequiredKeyPointsAtTheEnclosingBrace) {
  std::string text = lines({
      "{ \"services\": [",
      "    { \"name\": \"dns\", \"port\": 53 } ] }",
  });
  EXPECT_ERROR_AT(text, 2, 5, "services[0]: missing required key 'vip'");
  EXPECT_ERROR_AT(R"({"routes": [{"via": "eth0"}]})", 1, 13,
                  "routes[0]: missing required key 'prefix'");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{}]}})", 1, 25,
                  "xdp.interfaces[0]: missing required key 'name'");
}

TEST(ConfigValidate, DuplicateServiceNameNamesTheFirstDefinition) {
  std::string text = lines({
      "{ \"services\": [",
      "  {\"name\": \"dns\", \"vip\": \"10.0.0.10\", \"port\": 53, \"backends\": "
      "[\"10.0.1.2:53\"]},",
      "  {\"name\": \"dns\", \"vip\": \"10.0.0.11\", \"port\": 53, \"backends\": "
      "[\"10.0.1.2:53\"]}",
      "] }",
  });
  EXPECT_ERROR_AT(text, 3, 12,
                  "services[1].name: duplicate service name 'dns' (first defined at 2:12)");
}

TEST(ConfigValidate, UdpBackendSharedByTwoServicesIsRejected) {
  std::string text = lines({
      "{ \"services\": [",
      "  {\"name\": \"a\", \"vip\": \"10.0.0.10\", \"port\": 53, \"backends\": "
      "[\"10.0.1.2:53\"]},",
      "  {\"name\": \"b\", \"vip\": \"10.0.0.11\", \"port\": 53, \"backends\": "
      "[\"10.0.1.2:53\"]}",
      "] }",
  });
  EXPECT_ERROR_AT(text, 3, 61,
                  "services[1].backends: backend 10.0.1.2:53 already serves UDP service 'a' "
                  "(services[0]); a UDP backend can serve only one service, because replies are "
                  "matched by their source");
  // TCP services may share backends: the proxy keeps per-connection state.
  Config c = parse_config(
      R"({"services": [{"name": "a", "vip": "10.0.0.10", "port": 53, "protocols": ["tcp"], "backends": ["10.0.1.2:53"]},)"
      R"({"name": "b", "vip": "10.0.0.11", "port": 53, "protocols": ["tcp"], "backends": ["10.0.1.2:53"]}]})",
      "f.json");
  EXPECT_EQ(c.services.size(), 2u);
}

TEST(ConfigValidate, ServiceNamesAreRestrictedToAPortableAlphabet) {
  EXPECT_ERROR_AT(
      R"({"services": [{"name": "my dns"}]})", 1, 24,
      "services[0].name: 'my dns' is not a valid service name (1..64 of A-Z a-z 0-9 _ . -)");
  std::string long_name(65, 'a');
  EXPECT_ERROR_AT(R"({"services": [{"name": ")" + long_name + "\"}]}", 1, 24,
                  "services[0].name: '" + long_name +
                      "' is not a valid service name (1..64 of A-Z a-z 0-9 _ . -)");
}

TEST(ConfigValidate, BadAddressesEndpointsAndPrefixesAreRejectedWithAReason) {
  EXPECT_ERROR_AT(
      R"({"metrics": {"listen": "localhost:9469"}})", 1, 24,
      "metrics.listen: 'localhost:9469' is not ADDRESS:PORT (e.g. \"127.0.0.1:9469\" or "
      "\"[::1]:9469\")");
  EXPECT_ERROR_AT(R"({"services": [{"name": "a", "vip": "10.0.0.256"}]})", 1, 36,
                  "services[0].vip: '10.0.0.256' is not an IPv4 or IPv6 address");
  EXPECT_ERROR_AT(R"({"services": [{"name": "a", "vip": "0.0.0.0"}]})", 1, 36,
                  "services[0].vip: '0.0.0.0' is the unspecified address; a vip must be a specific "
                  "address");
  EXPECT_ERROR_AT(
      R"({"xdp": {"drop": ["192.0.2.1/24"]}})", 1, 19,
      "xdp.drop[0]: '192.0.2.1/24' is not a CIDR prefix: host bits are set (did you mean "
      "the network address?)");
  EXPECT_ERROR_AT(R"({"xdp": {"drop": ["10.0.0.0/8", "192.0.2.0/33"]}})", 1, 33,
                  "xdp.drop[1]: '192.0.2.0/33' is not a CIDR prefix: prefix length must be 0..32");
  EXPECT_ERROR_AT(R"({"xdp": {"drop": ["10.0.0.0/8", "10.0.0.0/8"]}})", 1, 33,
                  "xdp.drop[1]: 10.0.0.0/8 is already listed at xdp.drop[0]");
}

TEST(ConfigValidate, BackendsMustBeUniqueAndOfTheVipsFamily) {
  EXPECT_ERROR_AT(
      R"({"services": [{"name": "a", "vip": "10.0.0.1", "port": 53, "backends": )"
      R"(["10.0.1.2:53", "[2001:db8::2]:53"]}]})",
      1, 88,
      "services[0].backends[1]: [2001:db8::2]:53 is IPv6 but the vip 10.0.0.1 is IPv4; a "
      "backend must have the vip's address family");
  EXPECT_ERROR_AT(R"({"services": [{"name": "a", "vip": "10.0.0.1", "port": 53, "backends": )"
                  R"(["10.0.1.2:53", "10.0.1.2:53"]}]})",
                  1, 88,
                  "services[0].backends[1]: duplicate backend 10.0.1.2:53 (first listed at 1:73)");
  EXPECT_ERROR_AT(R"({"services": [{"name": "a", "vip": "10.0.0.1", "port": 53, "backends": )"
                  R"(["10.0.1.2:0"]}]})",
                  1, 73, "services[0].backends[0]: port 0 is not a backend port (1..65535)");
}

TEST(ConfigValidate, ModesConstrainBackendsAndProtocols) {
  // proxy without backends: at the service's brace when the key is absent, else at the array.
  EXPECT_ERROR_AT(R"({"services": [{"name": "a", "vip": "10.0.0.1", "port": 53}]})", 1, 15,
                  "services[0]: mode 'proxy' (the default) needs 'backends'; or set \"mode\" to "
                  "\"echo\" or \"reflect\"");
  EXPECT_ERROR_AT(R"({"services": [{"name": "a", "vip": "10.0.0.1", "port": 53, "backends": []}]})",
                  1, 72,
                  "services[0].backends: mode 'proxy' needs at least one backend \"ADDRESS:PORT\"");
  EXPECT_ERROR_AT(
      R"({"services": [{"name": "e", "vip": "127.0.0.1", "port": 7, "mode": "echo",)"
      R"( "protocols": ["tcp"], "backends": ["10.0.1.2:7"]}]})",
      1, 110,
      "services[0].backends: mode 'echo' takes no backends; remove 'backends' or use mode "
      "'proxy'");
  EXPECT_ERROR_AT(R"({"services": [{"name": "e", "vip": "127.0.0.1", "port": 7, "mode": "echo"}]})",
                  1, 68,
                  "services[0].mode: mode 'echo' serves TCP only; set \"protocols\": [\"tcp\"]");
  EXPECT_ERROR_AT(
      R"({"services": [{"name": "e", "vip": "127.0.0.1", "port": 7, "mode": "echo",)"
      R"( "protocols": ["tcp", "udp"]}]})",
      1, 89, "services[0].protocols: mode 'echo' serves TCP only; set \"protocols\": [\"tcp\"]");
  EXPECT_ERROR_AT(
      R"({"services": [{"name": "r", "vip": "10.0.0.1", "port": 7, "mode": "reflect",)"
      R"( "protocols": ["tcp"]}]})",
      1, 91, "services[0].protocols: mode 'reflect' serves UDP only; set \"protocols\": [\"udp\"]");
  Config c = parse_config(
      R"({"services": [{"name": "r", "vip": "10.0.0.1", "port": 7, "mode": "reflect"},)"
      R"( {"name": "e", "vip": "10.0.0.1", "port": 7, "mode": "echo", "protocols": ["tcp"]}]})",
      "f.json");
  EXPECT_EQ(c.services[0].mode, ServiceMode::reflect);
  EXPECT_EQ(c.services[1].mode, ServiceMode::echo);
}

TEST(ConfigValidate, TwoServicesMustNotShareVipPortAndProtocol) {
  std::string text = lines({
      "{ \"services\": [",
      "  {\"name\": \"a\", \"vip\": \"10.0.0.10\", \"port\": 53, \"backends\": [\"10.0.1.2:53\"],",
      "   \"protocols\": [\"udp\", \"tcp\"]},",
      "  {\"name\": \"b\", \"vip\": \"10.0.0.10\", \"port\": 53, \"backends\": [\"10.0.1.3:53\"],",
      "   \"protocols\": [\"tcp\"]}",
      "] }",
  });
  EXPECT_ERROR_AT(text, 4, 45,
                  "services[1].port: tcp 10.0.0.10 port 53 is already served by service 'a' "
                  "(services[0])");
  // The same vip and port on the other protocol is fine.
  Config c = parse_config(
      R"({"services": [)" + service() + "," +
          R"({"name": "t", "vip": "10.0.0.10", "port": 53, "protocols": ["tcp"], "backends": ["10.0.1.2:53"]}]})",
      "f.json");
  EXPECT_EQ(c.services.size(), 2u);
}

// One service, with `extra` keys, as a whole config; the error must point at `needle`.
std::string one_service(const std::string& extra) {
  return R"({"services": [)" + service(extra) + "]}";
}

TEST(ConfigValidate, ProtocolsAreANonEmptySetOfUdpAndTcp) {
  std::string text = one_service(R"(, "protocols": [])");
  EXPECT_ERROR_AT(text, 1, column_of(text, "[]"),
                  "services[0].protocols: must list at least one of \"udp\", \"tcp\"");
  text = one_service(R"(, "protocols": ["udp", "tcp", "udp"])");
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("udp"])"),
                  "services[0].protocols[2]: 'udp' is listed twice");
  text = one_service(R"(, "protocols": ["sctp"])");
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("sctp")"),
                  "services[0].protocols[0]: 'sctp' is not one of udp, tcp");
  text = one_service(R"(, "protocols": "udp")");
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("udp")"),
                  "services[0].protocols: expected an array of \"udp\" and/or \"tcp\", got the "
                  "string 'udp'");
}

TEST(ConfigValidate, HealthTimeoutMustBeShorterThanTheInterval) {
  std::string text = one_service(R"(, "health": {"interval_ms": 100, "timeout_ms": 100})");
  EXPECT_ERROR_AT(text, 1, column_of(text, "100}"),
                  "services[0].health.timeout_ms: 100 is out of range (1..99)");
  text = one_service(R"(, "health": {"interval_ms": 100})");
  EXPECT_ERROR_AT(
      text, 1, column_of(text, "100"),
      "services[0].health.interval_ms: 100 must be greater than timeout_ms (default 500); "
      "set timeout_ms too");
  text = one_service(R"(, "health": {"interval_ms": 5})");
  EXPECT_ERROR_AT(text, 1, column_of(text, "5}"),
                  "services[0].health.interval_ms: 5 is out of range (10..3600000)");
  text = one_service(R"(, "health": {"rise": 101})");
  EXPECT_ERROR_AT(text, 1, column_of(text, "101"),
                  "services[0].health.rise: 101 is out of range (1..100)");
  text = one_service(R"(, "health": {"fall": 0})");
  EXPECT_ERROR_AT(text, 1, column_of(text, "0}"),
                  "services[0].health.fall: 0 is out of range (1..100)");
  text = one_service(R"(, "health": 5)");
  EXPECT_ERROR_AT(text, 1, column_of(text, "5}"),
                  "services[0].health: expected an object or null, got 5");
  text = one_service(R"(, "health": {"interval": 5})");
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("interval")"),
                  "unknown key 'interval' in services[0].health (did you mean 'interval_ms'?)");
}

TEST(ConfigValidate, ControlKeysAreChecked) {
  EXPECT_ERROR_AT(R"({"control": {"socket": "run/ferry.sock"}})", 1, 24,
                  "control.socket: 'run/ferry.sock' is not an absolute path");
  std::string long_path = "/" + std::string(107, 's');
  EXPECT_ERROR_AT(R"({"control": {"socket": ")" + long_path + "\"}}", 1, 24,
                  "control.socket: path is 108 bytes; a Unix socket path may be at most 107");
  EXPECT_ERROR_AT(R"({"control": {"mode": "0778"}})", 1, 22,
                  "control.mode: '0778' is not an octal file mode such as \"0660\"");
  EXPECT_ERROR_AT(R"({"control": {"mode": "1777"}})", 1, 22,
                  "control.mode: '1777' is out of range (\"0000\"..\"0777\")");
  EXPECT_ERROR_AT(R"({"control": {"mode": 660}})", 1, 22,
                  "control.mode: expected a string of octal digits such as \"0660\", got 660");
  EXPECT_ERROR_AT(R"({"control": {"group": ""}})", 1, 23,
                  "control.group: '' is not a group name (non-empty; no ':', '/' or whitespace)");
  EXPECT_ERROR_AT(
      lines({"{ \"control\": {", "    \"tcp\": { \"listen\": \"127.0.0.1:9470\" } } }"}), 2, 12,
      "control.tcp: 'token_file' is required when 'listen' is set (TCP clients "
      "authenticate with it)");
  EXPECT_ERROR_AT(R"({"control": {"tcp": {"token_file": "token"}}})", 1, 36,
                  "control.tcp.token_file: 'token' is not an absolute path");
  Config c =
      parse_config(R"({"control": {"mode": "600", "group": "adm", "tcp": {"listen": "[::1]:9470", )"
                   R"("token_file": "/etc/ferry/token"}}})",
                   "f.json");
  EXPECT_EQ(c.control.mode, 0600u);
  EXPECT_EQ(c.control.group, "adm");
  EXPECT_EQ(c.control.tcp.listen->to_string(), "[::1]:9470");
  EXPECT_EQ(c.control.tcp.token_file, "/etc/ferry/token");
}

TEST(ConfigValidate, XdpInterfacesAreCheckedForNamesAndQueues) {
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "eth0"}, {"name": "eth0"}]}})", 1, 52,
                  "xdp.interfaces[1].name: duplicate interface 'eth0' (first defined at 1:34)");
  EXPECT_ERROR_AT(
      R"({"xdp": {"interfaces": [{"name": "abcdefghijklmnop"}]}})", 1, 34,
      "xdp.interfaces[0].name: 'abcdefghijklmnop' is 16 bytes; an interface name is 1..15 "
      "(IFNAMSIZ)");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "eth 0"}]}})", 1, 34,
                  "xdp.interfaces[0].name: 'eth 0' is not a valid interface name (no '/', ':' or "
                  "whitespace)");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "a/b"}]}})", 1, 34,
                  "xdp.interfaces[0].name: 'a/b' is not a valid interface name (no '/', ':' or "
                  "whitespace)");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "eth0", "queues": []}]}})", 1, 52,
                  "xdp.interfaces[0].queues: must list at least one queue, or be \"all\"");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "eth0", "queues": [0, 256]}]}})", 1, 56,
                  "xdp.interfaces[0].queues[1]: 256 is out of range (0..255)");
  EXPECT_ERROR_AT(
      R"({"xdp": {"interfaces": [{"name": "eth0", "queues": [1, 1]}]}})", 1, 56,
      "xdp.interfaces[0].queues[1]: queue 1 is already listed at xdp.interfaces[0].queues[0]");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "eth0", "queues": "some"}]}})", 1, 52,
                  "xdp.interfaces[0].queues: 'some' is not \"all\" or an array of queue numbers");
  EXPECT_ERROR_AT(R"({"xdp": {"interfaces": [{"name": "eth0", "mode": "skb"}]}})", 1, 50,
                  "xdp.interfaces[0].mode: 'skb' is not one of auto, native, generic");
  Config c = parse_config(
      R"({"xdp": {"interfaces": [{"name": "eth0", "queues": [3, 0], "mode": "native", )"
      R"("zerocopy": "off"}, {"name": "eth1"}]}})",
      "f.json");
  ASSERT_EQ(c.xdp.interfaces.size(), 2u);
  EXPECT_EQ(c.xdp.interfaces[0].queues, (std::vector<std::uint32_t>{3, 0}));
  EXPECT_EQ(c.xdp.interfaces[0].mode, XdpMode::native);
  EXPECT_EQ(c.xdp.interfaces[0].zerocopy, Tristate::off);
  EXPECT_FALSE(c.xdp.interfaces[1].queues);
  EXPECT_EQ(c.xdp.interfaces[1].mode, XdpMode::automatic);
}

TEST(ConfigValidate, RoutesMustLeaveThroughAConfiguredInterface) {
  EXPECT_ERROR_AT(
      R"({"routes": [{"prefix": "10.0.2.0/24", "via": "eth1"}]})", 1, 46,
      "routes[0].via: 'eth1' is not an interface in xdp.interfaces (none are configured)");
  std::string xdp = R"({"xdp": {"interfaces": [{"name": "gw0"}, {"name": "gw1"}]}, )";
  EXPECT_ERROR_AT(
      xdp + R"("routes": [{"prefix": "10.0.2.0/24", "via": "gw2"}]})", 1, 105,
      "routes[0].via: 'gw2' is not an interface in xdp.interfaces (did you mean 'gw0'?)");
  EXPECT_ERROR_AT(xdp + R"("routes": [{"prefix": "10.0.2.0/24", "via": "uplink"}]})", 1, 105,
                  "routes[0].via: 'uplink' is not an interface in xdp.interfaces (gw0, gw1)");
  EXPECT_ERROR_AT(xdp + R"("routes": [{"prefix": "10.0.2.0/24", "via": "gw0"}, )"
                        R"({"prefix": "10.0.2.0/24", "via": "gw1"}]})",
                  1, 124, "routes[1].prefix: 10.0.2.0/24 (udp) is already routed by routes[0]");
  Config c =
      parse_config(xdp + R"("routes": [{"prefix": "10.0.2.0/24", "via": "gw1"}, )"
                         R"({"prefix": "10.0.2.0/24", "via": "gw0", "protocols": ["tcp"]}]})",
                   "f.json");
  ASSERT_EQ(c.routes.size(), 2u);
  EXPECT_EQ(c.routes[0].prefix.to_string(), "10.0.2.0/24");
  EXPECT_EQ(c.routes[0].via, "gw1");
  EXPECT_EQ(c.routes[0].protocols, (Protocols{.udp = true, .tcp = false}));
  EXPECT_EQ(c.routes[1].protocols, (Protocols{.udp = false, .tcp = true}));
}

TEST(ConfigValidate, SyntaxErrorsCarryTheSourceName) {
  ConfigError e = error_of("{\n  \"a\": 1,\n}");
  EXPECT_EQ(e.file(), "f.json");
  EXPECT_STREQ(e.what(), "f.json:2:9: trailing comma before '}'");
}

TEST(ConfigValidate, MessagesEscapeControlCharactersAndCutLongText) {
  ConfigError e = error_of(R"({"log": {"level": "a\nb"}})");
  EXPECT_EQ(e.message(), "log.level: 'a\\x0ab' is not one of debug, info, notice, warning, error");
  e = error_of(R"({"log": {"level": ")" + std::string(200, 'x') + "\"}}");
  EXPECT_EQ(e.message(), "log.level: '" + std::string(80, 'x') +
                             "...' is not one of debug, info, notice, warning, error");
}

TEST(ConfigEnums, ToStringGivesTheConfigSpellings) {
  EXPECT_EQ(to_string(Tristate::automatic), "auto");
  EXPECT_EQ(to_string(Tristate::on), "on");
  EXPECT_EQ(to_string(Tristate::off), "off");
  EXPECT_EQ(to_string(XdpMode::automatic), "auto");
  EXPECT_EQ(to_string(XdpMode::native), "native");
  EXPECT_EQ(to_string(XdpMode::generic), "generic");
  EXPECT_EQ(to_string(IoReadyMode::inbox), "inbox");
  EXPECT_EQ(to_string(IoReadyMode::global), "global");
  EXPECT_EQ(to_string(IoReadyMode::index), "index");
  EXPECT_EQ(to_string(BalancePolicy::maglev), "maglev");
  EXPECT_EQ(to_string(BalancePolicy::round_robin), "round_robin");
  EXPECT_EQ(to_string(BalancePolicy::least_connections), "least_connections");
  EXPECT_EQ(to_string(ServiceMode::proxy), "proxy");
  EXPECT_EQ(to_string(ServiceMode::echo), "echo");
  EXPECT_EQ(to_string(ServiceMode::reflect), "reflect");
}

// The TCP proxy's keys: tcp.proxy.* and services[].max_connections.
TEST(ConfigProxyKeys, DefaultsAreTheDocumentedOnes) {
  Config c = parse_config("{}", "f.json");
  EXPECT_EQ(c.tcp.proxy.connect_timeout_ms, 2000u);
  EXPECT_EQ(c.tcp.proxy.connect_attempts, 3u);
  EXPECT_EQ(c.tcp.proxy.idle_timeout_ms, 300000u);
  EXPECT_EQ(c.tcp.proxy.drain_timeout_ms, 10000u);
  EXPECT_EQ(c.tcp.proxy.high_water_bytes, 1048576u);
  EXPECT_EQ(c.tcp.proxy.low_water_bytes, 65536u);
  EXPECT_EQ(c.tcp.proxy.max_connections, 65536u);
}

TEST(ConfigProxyKeys, EveryKeyIsReadAndWrittenBack) {
  Config c = parse_config(R"({"tcp": {"proxy": {"connect_timeout_ms": 150, "connect_attempts": 5,
      "idle_timeout_ms": 0, "drain_timeout_ms": 0, "high_water_bytes": 8192,
      "low_water_bytes": 4096, "max_connections": 10}},
      "services": [{"name": "web", "vip": "10.0.0.10", "port": 80, "protocols": ["tcp"],
                    "backends": ["10.0.1.2:80"], "max_connections": 7}]})",
                          "f.json");
  EXPECT_EQ(c.tcp.proxy.connect_timeout_ms, 150u);
  EXPECT_EQ(c.tcp.proxy.connect_attempts, 5u);
  EXPECT_EQ(c.tcp.proxy.idle_timeout_ms, 0u);
  EXPECT_EQ(c.tcp.proxy.drain_timeout_ms, 0u);
  EXPECT_EQ(c.tcp.proxy.high_water_bytes, 8192u);
  EXPECT_EQ(c.tcp.proxy.low_water_bytes, 4096u);
  EXPECT_EQ(c.tcp.proxy.max_connections, 10u);
  EXPECT_EQ(c.services[0].max_connections, 7u);
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["tcp"]["proxy"]["connect_attempts"], 5);
  EXPECT_EQ(j["tcp"]["proxy"]["low_water_bytes"], 4096);
  EXPECT_EQ(j["services"][0]["max_connections"], 7);
}

TEST(ConfigProxyKeys, OutOfRangeValuesNameThePathAndTheRange) {
  ConfigError e = error_of("{\"tcp\": {\"proxy\": {\"connect_attempts\": 0}}}");
  EXPECT_STREQ(e.what(), "f.json:1:40: tcp.proxy.connect_attempts: 0 is out of range (1..16)");
  e = error_of("{\"tcp\": {\"proxy\": {\n  \"connect_timeout_ms\": 0}}}");
  EXPECT_STREQ(e.what(),
               "f.json:2:25: tcp.proxy.connect_timeout_ms: 0 is out of range (1..600000)");
  e = error_of("{\"tcp\": {\"proxy\": {\"max_connections\": 0}}}");
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.message(), "tcp.proxy.max_connections: 0 is out of range (1..16777216)");
  e = error_of(
      R"({"services": [{"name": "w", "vip": "10.0.0.1", "port": 1, "backends": ["10.0.0.2:1"],
 "max_connections": -1}]})");
  EXPECT_EQ(e.line(), 2);
  EXPECT_EQ(e.column(), 21);
  EXPECT_EQ(e.message(), "services[0].max_connections: -1 is out of range (0..16777216)");
}

TEST(ConfigProxyKeys, IdleTimeoutIsOffOrAtLeastTenMilliseconds) {
  ConfigError e = error_of("{\"tcp\": {\"proxy\": {\"idle_timeout_ms\": 5}}}");
  EXPECT_EQ(e.column(), 39);
  EXPECT_EQ(e.message(), "tcp.proxy.idle_timeout_ms: 5 is too short; use 0 (off) or 10..86400000");
}

TEST(ConfigProxyKeys, LowWaterMustStayBelowHighWater) {
  ConfigError e =
      error_of("{\"tcp\": {\"proxy\": {\"high_water_bytes\": 8192, \"low_water_bytes\": 8192}}}");
  EXPECT_EQ(e.message(), "tcp.proxy.low_water_bytes: 8192 is out of range (0..8191)");
  e = error_of("{\"tcp\": {\"proxy\": {\"high_water_bytes\": 65536}}}");
  EXPECT_EQ(e.column(), 40);
  EXPECT_EQ(e.message(),
            "tcp.proxy.high_water_bytes: 65536 must be greater than low_water_bytes (default "
            "65536); set low_water_bytes too");
}

TEST(ConfigProxyKeys, UnknownProxyKeySuggestsTheRightOne) {
  ConfigError e = error_of("{\"tcp\": {\"proxy\": {\"idle_timeout\": 5}}}");
  EXPECT_EQ(e.column(), 20);
  EXPECT_EQ(e.message(),
            "unknown key 'idle_timeout' in tcp.proxy (did you mean 'idle_timeout_ms'?)");
}

}  // namespace
}  // namespace ferry::config
