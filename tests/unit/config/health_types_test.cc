// The health object's check types: defaults per type, every refused value with its exact line
// and column, keys that belong to another type, types the service's protocols cannot carry, and
// to_json printing the effective object so that it parses back to the same config.
#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

// One line: a service of `protocols` whose health object is `health`.
std::string with_health(const std::string& health,
                        const std::string& protocols = R"(["udp", "tcp"])") {
  return R"({"services": [{"name": "dns", "vip": "10.0.0.10", "port": 53, "protocols": )" +
         protocols + R"(, "backends": ["10.0.1.2:53"], "health": )" + health + "}]}";
}

HealthCheckConfig health_of(const std::string& health,
                            const std::string& protocols = R"(["udp", "tcp"])") {
  Config c = parse_config(with_health(health, protocols), "f.json");
  return *c.services.at(0).health;
}

// The error for `health` points at the first `needle` on the line.
void expect_error(const std::string& health, const std::string& needle, const std::string& message,
                  const std::string& protocols = R"(["udp", "tcp"])") {
  std::string text = with_health(health, protocols);
  ConfigError e = error_of(text);
  EXPECT_EQ(e.line(), 1) << e.what();
  EXPECT_EQ(e.column(), column_of(text, needle)) << e.what();
  EXPECT_EQ(e.message(), message) << e.what();
}

TEST(HealthTypes, TcpIsTheDefaultAndEveryTypeHasItsDefaults) {
  HealthCheckConfig tcp = health_of("{}");
  EXPECT_EQ(tcp.type, HealthCheckType::tcp);
  EXPECT_FALSE(tcp.port);
  HealthCheckConfig dns = health_of(R"({"type": "dns"})");
  EXPECT_EQ(dns.name, ".");
  EXPECT_EQ(dns.qtype, DnsQueryType::a);
  EXPECT_EQ(dns.rcodes, 1u);
  HealthCheckConfig http = health_of(R"({"type": "http"})");
  EXPECT_EQ(http.path, "/");
  EXPECT_FALSE(http.host);
  EXPECT_EQ(http.status_low, 200);
  EXPECT_EQ(http.status_high, 399);
}

TEST(HealthTypes, ReadsEveryKeyOfEachType) {
  HealthCheckConfig udp =
      health_of(R"({"type": "udp", "send_hex": "00ff41", "expect": "pong", "port": 5353})");
  EXPECT_EQ(udp.send, std::string("\x00\xff\x41", 3));
  EXPECT_EQ(udp.expect, "pong");
  EXPECT_EQ(udp.port, 5353);
  HealthCheckConfig dns = health_of(
      R"({"type": "dns", "name": "example.org.", "qtype": "SOA", "rcodes": ["NOERROR", "NXDOMAIN"]})");
  EXPECT_EQ(dns.name, "example.org.");
  EXPECT_EQ(dns.qtype, DnsQueryType::soa);
  EXPECT_EQ(dns.rcodes, 1u << 0 | 1u << 3);
  HealthCheckConfig http = health_of(
      R"({"type": "http", "path": "/healthz?full=1", "host": "web.example", "expect_status": [200, 204]})");
  EXPECT_EQ(http.path, "/healthz?full=1");
  EXPECT_EQ(http.host, "web.example");
  EXPECT_EQ(http.status_low, 200);
  EXPECT_EQ(http.status_high, 204);
}

TEST(HealthTypes, RefusesAnUnknownType) {
  expect_error(R"({"type": "icmp"})", R"("icmp")",
               "services[0].health.type: 'icmp' is not one of tcp, udp, dns, http");
  expect_error(R"({"type": "htp"})", R"("htp")",
               "services[0].health.type: 'htp' is not one of tcp, udp, dns, http (did you mean "
               "'http'?)");
}

TEST(HealthTypes, RefusesKeysOfAnotherType) {
  expect_error(R"({"type": "http", "name": "example.org"})", R"("name": "example.org")",
               "services[0].health: 'name' is a key of dns checks; a http check takes path, host, "
               "expect_status (set \"type\": \"dns\" to use it)");
  expect_error(R"({"path": "/"})", R"("path")",
               "services[0].health: 'path' is a key of http checks; a tcp check takes none of its "
               "own (set \"type\": \"http\" to use it)");
  expect_error(R"({"type": "dns", "send": "x"})", R"("send")",
               "services[0].health: 'send' is a key of udp checks; a dns check takes name, qtype, "
               "rcodes (set \"type\": \"udp\" to use it)");
  expect_error(R"({"type": "dns", "rcode": ["NOERROR"]})", R"("rcode")",
               "unknown key 'rcode' in services[0].health (did you mean 'rcodes'?)");
}

TEST(HealthTypes, RefusesTypesTheServicesProtocolsCannotCarry) {
  expect_error(R"({"type": "dns"})", R"("dns"})",
               "services[0].health.type: a dns check needs a service that serves UDP, but this one "
               "serves TCP only; use type \"tcp\"",
               R"(["tcp"])");
  expect_error(R"({"type": "udp", "send": "x"})", R"("udp")",
               "services[0].health.type: a udp check needs a service that serves UDP, but this one "
               "serves TCP only; use type \"tcp\"",
               R"(["tcp"])");
  expect_error(R"({"type": "http"})", R"("http")",
               "services[0].health.type: a http check needs a service that serves TCP, but this "
               "one serves UDP only; use type \"tcp\" or \"udp\"/\"dns\"",
               R"(["udp"])");
  // A dual-protocol service may use any type; a UDP-only one keeps today's tcp check.
  EXPECT_EQ(health_of(R"({"type": "http"})").type, HealthCheckType::http);
  EXPECT_EQ(health_of(R"({"type": "dns"})").type, HealthCheckType::dns);
  EXPECT_EQ(health_of(R"({"type": "tcp"})", R"(["udp"])").type, HealthCheckType::tcp);
}

TEST(HealthTypes, RefusesBadExpectStatus) {
  expect_error(R"({"type": "http", "expect_status": [200]})", "[200]",
               "services[0].health.expect_status: expected [low, high], two HTTP statuses "
               "(100..599), got an array of 1");
  expect_error(R"({"type": "http", "expect_status": 200})", "200}",
               "services[0].health.expect_status: expected [low, high], two HTTP statuses "
               "(100..599), got 200");
  expect_error(R"({"type": "http", "expect_status": [99, 200]})", "99",
               "services[0].health.expect_status[0]: 99 is out of range (100..599)");
  expect_error(R"({"type": "http", "expect_status": [200, 600]})", "600",
               "services[0].health.expect_status[1]: 600 is out of range (100..599)");
  expect_error(R"({"type": "http", "expect_status": [300, 200]})", "200]",
               "services[0].health.expect_status[1]: 200 is below the low bound 300; write [low, "
               "high]");
}

TEST(HealthTypes, RefusesBadHexAndPayloads) {
  expect_error(R"({"type": "udp", "send_hex": "abc"})", R"("abc")",
               "services[0].health.send_hex: 'abc' has an odd number of hex digits (3); write two "
               "per byte");
  expect_error(R"({"type": "udp", "send_hex": "zz00"})", R"("zz00")",
               "services[0].health.send_hex: 'zz00' is not hex: 'z' at offset 0");
  expect_error(R"({"type": "udp", "send": "x", "expect_hex": "0g"})", R"("0g")",
               "services[0].health.expect_hex: '0g' is not hex: 'g' at offset 1");
  expect_error(R"({"type": "udp", "send": "x", "send_hex": "00"})", R"("00")",
               "services[0].health.send_hex: give either 'send' or 'send_hex', not both");
  expect_error(R"({"type": "udp"})", R"({"type")",
               "services[0].health: a udp check needs 'send' (text) or 'send_hex' (bytes): the "
               "datagram it sends");
}

TEST(HealthTypes, RefusesBadDnsQuestionsAndRcodes) {
  expect_error(R"({"type": "dns", "qtype": "MX"})", R"("MX")",
               "services[0].health.qtype: 'MX' is not one of A, AAAA, NS, SOA");
  expect_error(R"({"type": "dns", "rcodes": ["NOERROR", "BADVERS"]})", R"("BADVERS")",
               "services[0].health.rcodes[1]: 'BADVERS' is not one of NOERROR, FORMERR, SERVFAIL, "
               "NXDOMAIN, NOTIMP, REFUSED");
  expect_error(R"({"type": "dns", "rcodes": []})", "[]",
               "services[0].health.rcodes: must list at least one RCODE (e.g. \"NOERROR\")");
  expect_error(R"({"type": "dns", "rcodes": ["REFUSED", "REFUSED"]})", R"("REFUSED"])",
               "services[0].health.rcodes[1]: 'REFUSED' is listed twice");
  expect_error(R"({"type": "dns", "name": "a..b"})", R"("a..b")",
               "services[0].health.name: 'a..b' is not a domain name: it has an empty label");
  expect_error(R"({"type": "dns", "name": "a b"})", R"("a b")",
               "services[0].health.name: 'a b' is not a domain name: ' ' is not a letter, digit, "
               "'-', '_' or '*'");
  expect_error(R"({"type": "dns", "name": ""})", R"("")",
               "services[0].health.name: '' is not a domain name: it is empty (the root is \".\")");
}

TEST(HealthTypes, RefusesBadHttpPathsHostsAndPorts) {
  expect_error(R"({"type": "http", "path": "healthz"})", R"("healthz")",
               "services[0].health.path: 'healthz' is not a request path: it must start with '/' "
               "and hold no spaces or control characters");
  expect_error(R"({"type": "http", "path": "/a b"})", R"("/a b")",
               "services[0].health.path: '/a b' is not a request path: it must start with '/' and "
               "hold no spaces or control characters");
  expect_error(R"({"type": "http", "host": "a b"})", R"("a b")",
               "services[0].health.host: 'a b' is not a Host header value (1..255 printable "
               "characters, no spaces)");
  expect_error(R"({"port": 0})", "0}", "services[0].health.port: 0 is out of range (1..65535)");
  expect_error(R"({"port": 65536})", "65536",
               "services[0].health.port: 65536 is out of range (1..65535)");
}

Config round_trip(const Config& c) {
  return parse_config(to_json(c).dump(2), c.source_path);
}

TEST(HealthTypes, ToJsonPrintsTheEffectiveObjectOfEachTypeAndParsesBack) {
  for (
      const char* health :
      {R"({})", R"({"type": "tcp", "port": 8053})",
       R"({"type": "udp", "send": "ping", "expect_hex": "00ff"})",
       R"({"type": "udp", "send_hex": "0001"})",
       R"({"type": "dns", "name": "example.org", "qtype": "AAAA", "rcodes": ["NXDOMAIN", "NOERROR"]})",
       R"({"type": "http", "path": "/healthz", "host": "web", "expect_status": [200, 299]})"}) {
    Config c = parse_config(with_health(health), "f.json");
    EXPECT_EQ(round_trip(c), c) << health;
  }
  auto json_of = [](const std::string& health) {
    return to_json(parse_config(with_health(health), "f.json"))["services"][0]["health"];
  };
  EXPECT_EQ(json_of("{}"), nlohmann::json::parse(R"({"type": "tcp", "port": null,
      "interval_ms": 1000, "timeout_ms": 500, "rise": 2, "fall": 3})"));
  EXPECT_EQ(json_of(R"({"type": "dns"})"), nlohmann::json::parse(R"({"type": "dns", "port": null,
      "interval_ms": 1000, "timeout_ms": 500, "rise": 2, "fall": 3,
      "name": ".", "qtype": "A", "rcodes": ["NOERROR"]})"));
  EXPECT_EQ(json_of(R"({"type": "http"})"), nlohmann::json::parse(R"({"type": "http", "port": null,
      "interval_ms": 1000, "timeout_ms": 500, "rise": 2, "fall": 3,
      "path": "/", "host": null, "expect_status": [200, 399]})"));
  EXPECT_EQ(json_of(R"({"type": "udp", "send_hex": "0070"})"),
            nlohmann::json::parse(R"({"type": "udp", "port": null, "interval_ms": 1000,
      "timeout_ms": 500, "rise": 2, "fall": 3, "send_hex": "0070", "expect": null})"));
}

}  // namespace
}  // namespace ferry::config
