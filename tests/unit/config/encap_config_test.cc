// Direct server return's keys: "xdp.encap" (the outer headers) and each service's "forwarding".
// Every error points at the value to fix (FILE:LINE:COL); nat services are checked as before, and
// the effective config (to_json, what `ferryctl config` prints) loads back to the same Config.
#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

constexpr const char* kEncap = R"({"source": "10.0.0.1"})";

// One config line: xdp with an interface and `encap` (empty: no encap key), and the services.
std::string config_with(const std::string& encap, const std::string& services) {
  return R"({"xdp": {"interfaces": [{"name": "eth0"}])" +
         (encap.empty() ? "" : R"(, "encap": )" + encap) + R"(}, "services": [)" + services + "]}";
}

// A TCP and UDP service on 10.0.0.12:80 with `forwarding`, `backends` and more keys.
std::string web(const std::string& forwarding, const std::string& backends = R"(["10.0.1.7:80"])",
                const std::string& more = "") {
  return R"({"name": "web", "vip": "10.0.0.12", "port": 80, "protocols": ["tcp", "udp"], )"
         R"("forwarding": ")" +
         forwarding + R"(", "backends": )" + backends + more + "}";
}

TEST(ConfigEncap, EncapAndForwardingAreRead) {
  Config c = parse_config(
      config_with(
          R"({"source": "10.0.0.1", "source_prefix": "10.0.0.0/28", "source6": "fd00::1", "gue_port": 7000})",
          web("ipip") + R"(, {"name": "h3", "vip": "fd00::13", "port": 443, "forwarding": "gue",)"
                        R"( "backends": ["[fd00:1::9]:443"]})"),
      "f.json");
  ASSERT_TRUE(c.xdp.encap);
  EXPECT_EQ(c.xdp.encap->source->to_string(), "10.0.0.1");
  EXPECT_EQ(c.xdp.encap->source_prefix->to_string(), "10.0.0.0/28");
  EXPECT_EQ(c.xdp.encap->source6->to_string(), "fd00::1");
  EXPECT_EQ(c.xdp.encap->gue_port, 7000);
  EXPECT_EQ(c.services[0].forwarding, Forwarding::ipip);
  EXPECT_EQ(c.services[1].forwarding, Forwarding::gue);
}

TEST(ConfigEncap, DefaultsAreNatAndNoEncap) {
  Config c = parse_config(
      R"({"services": [{"name": "dns", "vip": "10.0.0.10", "port": 53, "backends": ["10.0.1.2:53"]}]})",
      "f.json");
  EXPECT_EQ(c.services[0].forwarding, Forwarding::nat);
  EXPECT_FALSE(c.xdp.encap);
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["services"][0]["forwarding"], "nat");
  EXPECT_TRUE(j["xdp"]["encap"].is_null());
  EXPECT_FALSE(parse_config(R"({"xdp": {"encap": null}})", "f.json").xdp.encap);

  c = parse_config(R"({"xdp": {"encap": {"source6": "fd00::1"}}})", "f.json");
  ASSERT_TRUE(c.xdp.encap);
  EXPECT_FALSE(c.xdp.encap->source);
  EXPECT_FALSE(c.xdp.encap->source_prefix);
  EXPECT_EQ(c.xdp.encap->gue_port, 6080);
  EXPECT_EQ(EncapConfig{}.gue_port, 6080);
  EXPECT_EQ(ServiceConfig{}.forwarding, Forwarding::nat);
  EXPECT_EQ(to_string(Forwarding::nat), "nat");
  EXPECT_EQ(to_string(Forwarding::ipip), "ipip");
  EXPECT_EQ(to_string(Forwarding::gue), "gue");
}

TEST(ConfigEncap, EffectiveConfigWritesEveryKeyAndLoadsBack) {
  Config c = parse_config(config_with(kEncap, web("gue")), "f.json");
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["xdp"]["encap"],
            nlohmann::json::parse(R"({"source": "10.0.0.1", "source_prefix": null,
                                                           "source6": null, "gue_port": 6080})"));
  EXPECT_EQ(j["services"][0]["forwarding"], "gue");
  // The TCP proxy's keys are written with their defaults, which an encapsulating service takes.
  EXPECT_EQ(j["services"][0]["max_connections"], 0);
  EXPECT_TRUE(j["services"][0]["proxy_protocol"].is_null());
  EXPECT_EQ(j["services"][0]["accept_proxy_protocol"], false);
  Config back = parse_config(j.dump(2), c.source_path);
  EXPECT_EQ(back, c);

  c = parse_config(
      config_with(
          R"({"source": "10.0.0.1", "source_prefix": "10.0.0.0/24", "source6": "fd00::1", "gue_port": 1})",
          web("ipip")),
      "f.json");
  j = to_json(c);
  EXPECT_EQ(j["xdp"]["encap"]["source_prefix"], "10.0.0.0/24");
  EXPECT_EQ(j["xdp"]["encap"]["source6"], "fd00::1");
  EXPECT_EQ(parse_config(j.dump(), c.source_path), c);
}

// A reload compares the configs part by part with operator==: both keys are seen as changes.
TEST(ConfigEncap, ChangesOfForwardingAndEncapAreChanges) {
  const Config ipip = parse_config(config_with(kEncap, web("ipip")), "f.json");
  const Config gue = parse_config(config_with(kEncap, web("gue")), "f.json");
  const Config other_port = parse_config(
      config_with(R"({"source": "10.0.0.1", "gue_port": 6081})", web("ipip")), "f.json");
  EXPECT_NE(ipip.services[0], gue.services[0]);
  EXPECT_EQ(ipip.xdp, gue.xdp);
  EXPECT_NE(ipip.xdp, other_port.xdp);
  EXPECT_EQ(ipip.services, other_port.services);
  XdpConfig without = ipip.xdp;
  without.encap.reset();
  EXPECT_NE(without, ipip.xdp);
}

TEST(ConfigEncap, EncapErrorsPointAtTheValue) {
  auto encap_error = [](const std::string& encap, const std::string& needle,
                        const std::string& message) {
    std::string text = R"({"xdp": {"encap": )" + encap + "}}";
    EXPECT_ERROR_AT(text, 1, column_of(text, needle), message);
  };
  encap_error(R"({"source": "10.0.0.1", "port": 1})", R"("port")",
              "unknown key 'port' in xdp.encap (accepted: source, source_prefix, source6, "
              "gue_port)");
  encap_error(R"({"source": "fd00::1"})", R"("fd00::1")",
              "xdp.encap.source: 'fd00::1' is IPv6; 'source' is the outer IPv4 source (IPv6 "
              "sources go in 'source6')");
  encap_error(R"({"source6": "10.0.0.1"})", R"("10.0.0.1")",
              "xdp.encap.source6: '10.0.0.1' is IPv4; 'source6' is the outer IPv6 source (IPv4 "
              "sources go in 'source')");
  encap_error(R"({"source": 10})", "10",
              "xdp.encap.source: expected a string (an IPv4 address) or null, got 10");
  encap_error(R"({"source": "10.0.0"})", R"("10.0.0")",
              "xdp.encap.source: '10.0.0' is not an IPv4 or IPv6 address");
  encap_error(R"({"source": "0.0.0.0"})", R"("0.0.0.0")",
              "xdp.encap.source: '0.0.0.0' is the unspecified address; the outer source must be "
              "a specific address of this host");
  encap_error(R"({"source6": "::"})", R"("::")",
              "xdp.encap.source6: '::' is the unspecified address; the outer source must be a "
              "specific address of this host");
  encap_error(R"({"source": "10.0.0.1", "source_prefix": "fd00::/64"})", R"("fd00::/64")",
              "xdp.encap.source_prefix: 'fd00::/64' is IPv6; outer sources vary within an IPv4 "
              "prefix only (IPv6 packets always leave from 'source6')");
  encap_error(R"({"source": "10.0.0.1", "source_prefix": "8.0.0.0/7"})", R"("8.0.0.0/7")",
              "xdp.encap.source_prefix: /7 is too wide; the prefix length must be 8..32");
  encap_error(R"({"source": "10.0.0.1", "source_prefix": "10.0.1.0/24"})", R"("10.0.1.0/24")",
              "xdp.encap.source_prefix: 10.0.1.0/24 does not contain 'source' 10.0.0.1; the "
              "outer sources vary within this prefix, so it must hold the source");
  encap_error(R"({"source6": "fd00::1", "source_prefix": "10.0.0.0/28"})", R"("10.0.0.0/28")",
              "xdp.encap.source_prefix: needs 'source', an address within it (the outer source "
              "of packets that do not vary it, and of GUE)");
  encap_error(R"({"source": "10.0.0.1", "source_prefix": 28})", "28",
              "xdp.encap.source_prefix: expected a string (an IPv4 CIDR prefix such as "
              "\"10.0.0.0/28\") or null, got 28");
  encap_error(R"({"source": "10.0.0.1", "gue_port": 0})", "0}",
              "xdp.encap.gue_port: 0 is out of range (1..65535)");
  encap_error(R"({"source": "10.0.0.1", "gue_port": 65536})", "65536",
              "xdp.encap.gue_port: 65536 is out of range (1..65535)");
  encap_error(R"({"source": null, "gue_port": 6080})", "{\"source\"",
              "xdp.encap: needs 'source' (the outer IPv4 source, for IPv4 backends), 'source6' "
              "(IPv6), or both");
  encap_error(R"("10.0.0.1")", R"("10.0.0.1")",
              "xdp.encap: expected an object {...}, got the string '10.0.0.1'");
}

TEST(ConfigEncap, SourcePrefixBoundsAreInclusive) {
  for (const char* prefix : {"10.0.0.0/8", "10.0.0.1/32"}) {
    Config c =
        parse_config(std::string(R"({"xdp": {"encap": {"source": "10.0.0.1", "source_prefix": ")") +
                         prefix + R"("}}})",
                     "f.json");
    EXPECT_EQ(c.xdp.encap->source_prefix->to_string(), prefix);
  }
}

TEST(ConfigEncap, ForwardingErrorsPointAtTheKeyToChange) {
  auto forwarding_error = [](const std::string& text, const std::string& needle,
                             const std::string& message) {
    EXPECT_ERROR_AT(text, 1, column_of(text, needle), message);
  };
  forwarding_error(config_with(kEncap, web("dsr")), R"("dsr")",
                   "services[0].forwarding: 'dsr' is not one of nat, ipip, gue");
  forwarding_error(config_with(kEncap, web("IPIP")), R"("IPIP")",
                   "services[0].forwarding: 'IPIP' is not one of nat, ipip, gue (did you mean "
                   "'ipip'?)");
  forwarding_error(
      config_with(
          kEncap,
          R"({"name": "r", "vip": "10.0.0.12", "port": 80, "mode": "reflect", "forwarding": "ipip"})"),
      R"("ipip")",
      "services[0].forwarding: 'ipip' forwards to backends and mode 'reflect' has none; remove "
      "it, or use mode 'proxy'");
  forwarding_error(
      config_with(
          kEncap,
          R"({"name": "e", "vip": "10.0.0.12", "port": 80, "protocols": ["tcp"], "mode": "echo", "forwarding": "gue"})"),
      R"("gue")",
      "services[0].forwarding: 'gue' forwards to backends and mode 'echo' has none; remove it, "
      "or use mode 'proxy'");
  std::string text =
      R"({"xdp": {"encap": {"source": "10.0.0.1"}}, "services": [)" + web("ipip") + "]}";
  forwarding_error(text, R"("ipip")",
                   "services[0].forwarding: 'ipip' runs on the XDP fast path and xdp.interfaces is "
                   "empty; list the interface the vip is reached through");
  forwarding_error(config_with("", web("gue")), R"("gue")",
                   "services[0].forwarding: 'gue' needs xdp.encap, the outer header's source "
                   "address (e.g. \"xdp\": {\"encap\": {\"source\": \"10.0.0.1\"}})");
  forwarding_error(config_with("null", web("ipip")), R"("ipip")",
                   "services[0].forwarding: 'ipip' needs xdp.encap, the outer header's source "
                   "address (e.g. \"xdp\": {\"encap\": {\"source\": \"10.0.0.1\"}})");
}

TEST(ConfigEncap, BackendsServeTheServicePort) {
  std::string text = config_with(kEncap, web("ipip", R"(["10.0.1.7:80", "10.0.1.8:8080"])"));
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("10.0.1.8:8080")"),
                  "services[0].backends[1]: 10.0.1.8:8080 is on port 8080, not the service's "
                  "port 80; with forwarding 'ipip' the packet reaches the backend unchanged, "
                  "addressed to the vip 10.0.0.12 port 80, so the backend must serve that port "
                  "(write 10.0.1.8:80)");
  text = config_with(kEncap, web("gue", R"([{"address": "10.0.1.7:81", "weight": 2}])"));
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("10.0.1.7:81")"),
                  "services[0].backends[0].address: 10.0.1.7:81 is on port 81, not the service's "
                  "port 80; with forwarding 'gue' the packet reaches the backend unchanged, "
                  "addressed to the vip 10.0.0.12 port 80, so the backend must serve that port "
                  "(write 10.0.1.7:80)");
  // nat rewrites the port: any backend port, as before.
  Config c = parse_config(config_with("", web("nat", R"(["10.0.1.7:8080"])")), "f.json");
  EXPECT_EQ(c.services[0].backends[0].port, 8080);
}

TEST(ConfigEncap, BackendsNeedAnOuterSourceOfTheirFamily) {
  std::string text =
      config_with(R"({"source": "10.0.0.1"})",
                  R"({"name": "v6", "vip": "fd00::12", "port": 80, "forwarding": "ipip", )"
                  R"("backends": ["[fd00:1::7]:80"]})");
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("[fd00:1::7]:80")"),
                  "services[0].backends[0]: [fd00:1::7]:80 is IPv6 and xdp.encap has no "
                  "'source6', the outer IPv6 source; set it");
  text = config_with(R"({"source6": "fd00::1"})", web("gue"));
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("10.0.1.7:80")"),
                  "services[0].backends[0]: 10.0.1.7:80 is IPv4 and xdp.encap has no 'source', "
                  "the outer IPv4 source; set it");
}

TEST(ConfigEncap, TcpProxyKeysAreRefusedBecauseNoProxyTerminates) {
  const std::string why =
      "with forwarding 'ipip' no proxy terminates the connections (the fast path forwards the "
      "packets and the backend answers the client directly), so ";
  std::string text =
      config_with(kEncap, web("ipip", R"(["10.0.1.7:80"])", R"(, "proxy_protocol": "v2")"));
  EXPECT_ERROR_AT(text, 1, column_of(text, R"("v2")"),
                  "services[0].proxy_protocol: " + why +
                      "there is no connection to the backend to write a PROXY header on (the "
                      "backend sees the client's own address); remove it");
  text =
      config_with(kEncap, web("ipip", R"(["10.0.1.7:80"])", R"(, "accept_proxy_protocol": true)"));
  EXPECT_ERROR_AT(text, 1, column_of(text, "true"),
                  "services[0].accept_proxy_protocol: " + why +
                      "nothing reads the clients' bytes, so a PROXY header would reach the "
                      "backend as data; remove it");
  text = config_with(kEncap, web("ipip", R"(["10.0.1.7:80"])", R"(, "max_connections": 100)"));
  EXPECT_ERROR_AT(text, 1, column_of(text, "100"),
                  "services[0].max_connections: " + why +
                      "there are no proxied connections to count or cap; remove it");
  // Their defaults are no setting at all.
  Config c =
      parse_config(config_with(kEncap, web("ipip", R"(["10.0.1.7:80"])",
                                           R"(, "max_connections": 0, "proxy_protocol": null, )"
                                           R"("accept_proxy_protocol": false)")),
                   "f.json");
  EXPECT_EQ(c.services[0].max_connections, 0u);
}

TEST(ConfigEncap, AffinityHealthAndQuicLbStay) {
  Config c = parse_config(
      config_with(
          kEncap,
          web("gue", R"([{"address": "10.0.1.7:80", "server_id": "0001"}])",
              R"(, "affinity": "none", "health": {"type": "http"},)"
              R"( "quic_lb": {"configs": [{"id": 0, "server_id_bytes": 2, "nonce_bytes": 6}]})")),
      "f.json");
  const ServiceConfig& s = c.services[0];
  EXPECT_EQ(s.affinity, Affinity::none);
  ASSERT_TRUE(s.health);
  EXPECT_EQ(s.health->type, HealthCheckType::http);
  ASSERT_TRUE(s.quic_lb);
  EXPECT_EQ(parse_config(to_json(c).dump(), "g.json").services, c.services);
}

// Replies of a nat UDP service are matched by their source, so its backends are its own; the
// backends of an encapsulating service answer the client directly and may serve many services.
TEST(ConfigEncap, OnlyNatUdpServicesKeepTheirBackendsToThemselves) {
  auto service = [](const std::string& name, const std::string& vip,
                    const std::string& forwarding) {
    return R"({"name": ")" + name + R"(", "vip": ")" + vip + R"(", "port": 53, "forwarding": ")" +
           forwarding + R"(", "backends": ["10.0.1.2:53"]})";
  };
  for (const auto& [a, b] : {std::pair{"ipip", "gue"}, std::pair{"ipip", "ipip"},
                             std::pair{"nat", "ipip"}, std::pair{"gue", "nat"}}) {
    Config c = parse_config(
        config_with(kEncap, service("a", "10.0.0.10", a) + ", " + service("b", "10.0.0.11", b)),
        "f.json");
    EXPECT_EQ(c.services[0].backends, c.services[1].backends) << a << " " << b;
  }
  std::string text = config_with(kEncap, service("a", "10.0.0.10", "nat") + ", " +
                                             service("b", "10.0.0.11", "ipip") + ", " +
                                             service("c", "10.0.0.12", "nat"));
  EXPECT_ERROR_AT(text, 1, column_of(text, R"(["10.0.1.2:53"]}])"),
                  "services[2].backends: backend 10.0.1.2:53 already serves UDP service 'a' "
                  "(services[0]); a UDP backend can serve only one service, because replies are "
                  "matched by their source");
}

TEST(ConfigEncap, ErrorsCarryTheirLineInAFile) {
  const std::string text =
      "{\n"
      "  \"xdp\": { \"interfaces\": [ { \"name\": \"eth0\" } ],\n"
      "           \"encap\": { \"source\": \"10.0.0.1\",\n"
      "                      \"source_prefix\": \"10.0.0.0/30\", \"gue_port\": 6080 } },\n"
      "  \"services\": [ { \"name\": \"web\", \"vip\": \"10.0.0.12\", \"port\": 80,\n"
      "                  \"forwarding\": \"ipip\", \"backends\": [ \"10.0.1.7:8080\" ] } ]\n"
      "}\n";
  EXPECT_ERROR_AT(text, 6, 55,
                  "services[0].backends[0]: 10.0.1.7:8080 is on port 8080, not the service's "
                  "port 80; with forwarding 'ipip' the packet reaches the backend unchanged, "
                  "addressed to the vip 10.0.0.12 port 80, so the backend must serve that port "
                  "(write 10.0.1.7:80)");
}

}  // namespace
}  // namespace ferry::config
