// The PROXY protocol keys of a service: proxy_protocol ("v1" | "v2" | null) and
// accept_proxy_protocol, only on TCP services in mode proxy.
#include <gtest/gtest.h>

#include <string>

#include "lib/config/config.hh"
#include "tests/unit/config/config_errors.hh"

namespace ferry::config {
namespace {

using test::column_of;
using test::error_of;

std::string service_with(const std::string& keys, const std::string& protocols = "[\"tcp\"]",
                         const std::string& mode = "") {
  return R"({"services": [{"name": "web", "vip": "10.0.0.10", "port": 80, "protocols": )" +
         protocols + mode +
         (mode.find("echo") != std::string::npos ? "" : R"(, "backends": ["10.0.1.2:80"])") + ", " +
         keys + "}]}";
}

TEST(ConfigProxyProtocol, OffByDefaultAndWrittenBackAsNullAndFalse) {
  Config c = parse_config(service_with(R"("balance": "maglev")"), "f.json");
  EXPECT_EQ(c.services[0].proxy_protocol, ProxyProtocol::off);
  EXPECT_FALSE(c.services[0].accept_proxy_protocol);
  nlohmann::json j = to_json(c);
  EXPECT_TRUE(j["services"][0]["proxy_protocol"].is_null());
  EXPECT_EQ(j["services"][0]["accept_proxy_protocol"], false);
  c = parse_config(service_with(R"("proxy_protocol": null, "accept_proxy_protocol": false)"),
                   "f.json");
  EXPECT_EQ(c.services[0].proxy_protocol, ProxyProtocol::off);
}

TEST(ConfigProxyProtocol, VersionsAndAcceptAreReadAndWrittenBack) {
  Config c = parse_config(service_with(R"("proxy_protocol": "v1")"), "f.json");
  EXPECT_EQ(c.services[0].proxy_protocol, ProxyProtocol::v1);
  EXPECT_EQ(to_json(c)["services"][0]["proxy_protocol"], "v1");
  c = parse_config(
      service_with(R"("proxy_protocol": "v2", "accept_proxy_protocol": true)", R"(["udp", "tcp"])"),
      "f.json");
  EXPECT_EQ(c.services[0].proxy_protocol, ProxyProtocol::v2);
  EXPECT_TRUE(c.services[0].accept_proxy_protocol);
  nlohmann::json j = to_json(c);
  EXPECT_EQ(j["services"][0]["proxy_protocol"], "v2");
  EXPECT_EQ(j["services"][0]["accept_proxy_protocol"], true);
  // The effective config parses back to the same service.
  EXPECT_EQ(parse_config(j.dump(), "g.json").services, c.services);
}

TEST(ConfigProxyProtocol, UnknownValuesPointAtTheValue) {
  std::string text = service_with(R"("proxy_protocol": "v3")");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.line(), 1);
  EXPECT_EQ(e.column(), column_of(text, "\"v3\""));
  EXPECT_TRUE(e.message().starts_with("services[0].proxy_protocol: 'v3' is not one of v1, v2"))
      << e.what();
  text = service_with(R"("proxy_protocol": true)");
  e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "true"));
  text = service_with(R"("accept_proxy_protocol": "yes")");
  e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"yes\""));
  EXPECT_NE(e.message().find("services[0].accept_proxy_protocol"), std::string::npos) << e.what();
}

TEST(ConfigProxyProtocol, UdpOnlyServicesRefuseBothKeys) {
  for (const std::string key : {R"("proxy_protocol": "v2")", R"("accept_proxy_protocol": true)"}) {
    std::string text = service_with(key, R"(["udp"])");
    ConfigError e = error_of(text);
    EXPECT_EQ(e.column(), column_of(text, key.substr(key.find(": ") + 2))) << e.what();
    EXPECT_NE(e.message().find("serves UDP only"), std::string::npos) << e.what();
  }
  // false is the default, so it is no error anywhere.
  EXPECT_NO_THROW(
      parse_config(service_with(R"("accept_proxy_protocol": false)", R"(["udp"])"), "f.json"));
}

TEST(ConfigProxyProtocol, NonProxyModesRefuseBothKeys) {
  std::string text = service_with(R"("proxy_protocol": "v1")", R"(["tcp"])", R"(, "mode": "echo")");
  ConfigError e = error_of(text);
  EXPECT_EQ(e.column(), column_of(text, "\"v1\""));
  EXPECT_EQ(e.message(),
            "services[0].proxy_protocol: applies to TCP services in mode 'proxy', not mode 'echo'; "
            "remove it")
      << e.what();
}

}  // namespace
}  // namespace ferry::config
