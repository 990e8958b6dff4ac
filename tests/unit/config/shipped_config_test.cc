// The shipped etc/ferry/*.json validate, and ferryd.json states exactly the built-in defaults;
// to_json gives back a config that parses to the same Config.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "lib/config/config.hh"

#ifndef FERRY_SOURCE_ROOT
#error "FERRY_SOURCE_ROOT must name the source tree (set in tests/unit/config/meson.build)"
#endif

namespace ferry::config {
namespace {

// Reads the file directly, not through load_config: a checkout's file modes follow the umask of
// whoever cloned it, and this test is about the content.
Config parse_shipped(const std::string& relative) {
  std::string path = std::string(FERRY_SOURCE_ROOT) + "/" + relative;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return parse_config(text.str(), path);
}

Config round_trip(const Config& c) {
  Config back = parse_config(to_json(c).dump(2), c.source_path);
  return back;
}

TEST(ShippedConfig, DefaultFileEqualsTheBuiltInDefaults) {
  Config c = parse_shipped("etc/ferry/ferryd.json");
  Config defaults;
  defaults.source_path = c.source_path;
  EXPECT_EQ(c, defaults);
  EXPECT_EQ(to_json(c), to_json(defaults));
}

TEST(ShippedConfig, DemoFileDescribesTheDemoLab) {
  Config c = parse_shipped("etc/ferry/demo.json");
  EXPECT_EQ(c.control.socket, "/run/ferry/demo.sock");
  EXPECT_EQ(c.control.mode, 0660u);
  EXPECT_FALSE(c.control.group);
  EXPECT_EQ(c.metrics.listen->to_string(), "127.0.0.1:9469");
  ASSERT_EQ(c.xdp.interfaces.size(), 2u);
  EXPECT_EQ(c.xdp.interfaces[0].name, "gw0");
  EXPECT_EQ(c.xdp.interfaces[1].name, "gw1");
  EXPECT_FALSE(c.xdp.interfaces[0].queues);
  ASSERT_EQ(c.services.size(), 3u);

  const ServiceConfig& dns = c.services[0];
  EXPECT_EQ(dns.name, "dns-demo");
  EXPECT_EQ(dns.vip.to_string(), "10.77.0.10");
  EXPECT_EQ(dns.port, 5353);
  EXPECT_EQ(dns.protocols, (Protocols{.udp = true, .tcp = false}));
  EXPECT_EQ(dns.balance, BalancePolicy::maglev);
  EXPECT_TRUE(dns.health);
  ASSERT_EQ(dns.backends.size(), 3u);
  EXPECT_EQ(dns.backends[0].to_string(), "10.77.1.2:5353");
  EXPECT_EQ(dns.backends[2].to_string(), "10.77.1.4:5353");

  const ServiceConfig& web = c.services[1];
  EXPECT_EQ(web.name, "web-demo");
  EXPECT_EQ(web.vip.to_string(), "10.77.0.10");
  EXPECT_EQ(web.port, 8080);
  EXPECT_EQ(web.protocols, (Protocols{.udp = false, .tcp = true}));
  ASSERT_EQ(web.backends.size(), 3u);
  EXPECT_EQ(web.backends[1].to_string(), "10.77.1.3:8080");

  const ServiceConfig& echo = c.services[2];
  EXPECT_EQ(echo.name, "echo");
  EXPECT_EQ(echo.vip.to_string(), "127.0.0.1");
  EXPECT_EQ(echo.port, 7007);
  EXPECT_EQ(echo.mode, ServiceMode::echo);
  EXPECT_EQ(echo.protocols, (Protocols{.udp = false, .tcp = true}));
  EXPECT_TRUE(echo.backends.empty());

  ASSERT_EQ(c.routes.size(), 1u);
  EXPECT_EQ(c.routes[0].prefix.to_string(), "10.77.2.0/24");
  EXPECT_EQ(c.routes[0].via, "gw1");
}

TEST(ConfigToJson, HasEveryKeyInTheFilesShape) {
  nlohmann::json j = to_json(Config{});
  EXPECT_EQ(j["control"]["socket"], "/run/ferry/ferryd.sock");
  EXPECT_EQ(j["control"]["mode"], "0660");
  EXPECT_EQ(j["control"]["group"], "ferry");
  EXPECT_TRUE(j["control"]["tcp"]["listen"].is_null());
  EXPECT_TRUE(j["control"]["tcp"]["token_file"].is_null());
  EXPECT_EQ(j["metrics"]["listen"], "127.0.0.1:9469");
  EXPECT_EQ(j["log"]["level"], "info");
  EXPECT_EQ(j["xdp"]["interfaces"], nlohmann::json::array());
  EXPECT_EQ(j["xdp"]["umem"]["frames"], 16384);
  EXPECT_EQ(j["xdp"]["umem"]["frame_bytes"], 4096);
  EXPECT_EQ(j["xdp"]["rings"]["fill"], 4096);
  EXPECT_EQ(j["xdp"]["rings"]["completion"], 2048);
  EXPECT_EQ(j["xdp"]["drop"], nlohmann::json::array());
  EXPECT_EQ(j["tcp"]["workers"], 2);
  EXPECT_EQ(j["tcp"]["buffers"]["bundle"], "auto");
  EXPECT_EQ(j["tcp"]["scheduler"]["io_ready"], "inbox");
  EXPECT_EQ(j["services"], nlohmann::json::array());
  EXPECT_EQ(j["routes"], nlohmann::json::array());
}

TEST(ConfigToJson, FillsInServiceDefaults) {
  Config c = parse_config(
      R"({"services": [{"name": "a", "vip": "10.0.0.1", "port": 53, "backends": ["10.0.1.2:53"]}]})",
      "f.json");
  nlohmann::json s = to_json(c)["services"][0];
  EXPECT_EQ(s["protocols"], nlohmann::json::array({"udp"}));
  EXPECT_EQ(s["balance"], "maglev");
  EXPECT_EQ(s["mode"], "proxy");
  EXPECT_TRUE(s["health"].is_null());
  EXPECT_EQ(s["backends"], nlohmann::json::array({"10.0.1.2:53"}));
}

TEST(ConfigToJson, RoundTripsTheShippedConfigs) {
  for (const char* file : {"etc/ferry/ferryd.json", "etc/ferry/demo.json"}) {
    Config c = parse_shipped(file);
    EXPECT_EQ(round_trip(c), c) << file;
  }
}

TEST(ConfigToJson, RoundTripsAConfigWithEveryValueChanged) {
  Config c = parse_config(R"({
    "control": { "socket": "/tmp/x.sock", "mode": "0600", "group": null,
                 "tcp": { "listen": "[::1]:9470", "token_file": "/etc/ferry/token" } },
    "metrics": { "listen": null },
    "log": { "level": "warning" },
    "xdp": {
      "interfaces": [ { "name": "eth0", "queues": [2, 0, 1], "mode": "generic", "zerocopy": "on" },
                      { "name": "eth1", "queues": "all", "mode": "native", "zerocopy": "off" } ],
      "umem": { "frames": 64, "frame_bytes": 2048 },
      "rings": { "fill": 64, "completion": 128, "rx": 65536, "tx": 256 },
      "drop": [ "192.0.2.0/24", "2001:db8::/32" ]
    },
    "tcp": { "workers": 256,
             "buffers": { "count": 32768, "bytes": 512, "bundle": "off", "incremental": "on" },
             "scheduler": { "io_ready": "index" } },
    "services": [
      { "name": "v6", "vip": "2001:db8::10", "port": 65535, "protocols": ["tcp", "udp"],
        "backends": ["[2001:db8::2]:1", "[2001:db8::3]:2"], "balance": "round_robin",
        "health": { "interval_ms": 3600000, "timeout_ms": 1, "rise": 100, "fall": 1 } },
      { "name": "r", "vip": "10.0.0.1", "port": 1, "mode": "reflect" },
      { "name": "e", "vip": "10.0.0.1", "port": 1, "mode": "echo", "protocols": ["tcp"] }
    ],
    "routes": [ { "prefix": "0.0.0.0/0", "via": "eth1", "protocols": ["udp", "tcp"] },
                { "prefix": "2001:db8:1::/48", "via": "eth0" } ]
  })",
                          "every.json");
  EXPECT_EQ(round_trip(c), c);
  EXPECT_NE(c, Config{});
  EXPECT_EQ(to_json(c)["control"]["mode"], "0600");
  EXPECT_EQ(to_json(c)["xdp"]["interfaces"][0]["queues"], nlohmann::json::array({2, 0, 1}));
  EXPECT_EQ(to_json(c)["xdp"]["interfaces"][1]["queues"], "all");
}

}  // namespace
}  // namespace ferry::config
