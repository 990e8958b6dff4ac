// The services section of the config: each service with its backends (plain "ADDRESS:PORT" or
// weighted objects), balance, affinity and health, and the checks across services.
#include "lib/config/validate_service.hh"

#include <unordered_map>

#include "lib/config/validate_encap.hh"
#include "lib/config/validate_health.hh"
#include "lib/config/validate_quic_lb.hh"

namespace ferry::config::schema {
namespace {

class ServiceReader : public SchemaReader {
 public:
  ServiceReader(const SchemaReader& reader, const XdpConfig& xdp)
      : SchemaReader(reader), xdp_(xdp) {}

  void read_services(const JsonValue& v, const std::string& path,
                     std::vector<ServiceConfig>& out) const {
    expect(v, path, Kind::array, "an array of service objects");
    std::unordered_map<std::string, SourcePosition> names;
    // "vip|port|proto" -> index of the service that serves it
    std::unordered_map<std::string, std::size_t> listeners;
    // backend "ip:port" -> index of the UDP nat service it serves
    std::unordered_map<std::string, std::size_t> udp_backends;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& item = v.items[i];
      std::string item_path = element(path, i);
      ServiceConfig s = read_service(item, item_path);
      const JsonValue& name = *item.find("name");
      if (auto [it, inserted] = names.emplace(s.name, name.position); !inserted) {
        fail(name.position, item_path + ".name",
             fmt::format("duplicate service name {} (first defined at {})", in_quotes(s.name),
                         position_text(it->second)));
      }
      for (bool tcp : {false, true}) {
        if (!(tcp ? s.protocols.tcp : s.protocols.udp)) continue;
        std::string key = fmt::format("{}|{}|{}", s.vip.to_string(), s.port, protocol_name(tcp));
        auto [it, inserted] = listeners.emplace(key, i);
        if (!inserted) {
          const JsonValue& port = *item.find("port");
          fail(port.position, item_path + ".port",
               fmt::format("{} {} port {} is already served by service {} ({})", protocol_name(tcp),
                           s.vip.to_string(), s.port, in_quotes(out[it->second].name),
                           element(path, it->second)));
        }
      }
      // The stateless UDP path recognises a reply by its source (backend ip:port) alone, so one
      // backend cannot serve two UDP nat services: its replies could not be told apart. The
      // backends of an encapsulating service answer the client directly, never through ferry.
      if (s.protocols.udp && s.mode == ServiceMode::proxy && s.forwarding == Forwarding::nat) {
        for (const auto& b : s.backends) {
          auto [it, inserted] = udp_backends.emplace(b.to_string(), i);
          if (!inserted) {
            fail(item.find("backends")->position, item_path + ".backends",
                 fmt::format("backend {} already serves UDP service {} ({}); a UDP backend can "
                             "serve only one service, because replies are matched by their source",
                             b.to_string(), in_quotes(out[it->second].name),
                             element(path, it->second)));
          }
        }
      }
      out.push_back(std::move(s));
    }
  }

  ServiceConfig read_service(const JsonValue& v, const std::string& path) const {
    ObjectReader o(
        *this, v, path,
        {"name", "vip", "port", "protocols", "backends", "balance", "affinity", "mode", "health",
         "max_connections", "proxy_protocol", "accept_proxy_protocol", "quic_lb", "forwarding"});
    ServiceConfig s;
    const JsonValue& name = o.require("name");
    s.name = read_string(name, o.path_of("name"), "a string (the service name)");
    check_service_name(name, o.path_of("name"));
    const JsonValue& vip = o.require("vip");
    s.vip = read_address(vip, o.path_of("vip"));
    if (is_unspecified(s.vip)) {
      fail(vip.position, o.path_of("vip"),
           fmt::format("{} is the unspecified address; a vip must be a specific address",
                       in_quotes(vip.text)));
    }
    s.port =
        static_cast<std::uint16_t>(read_integer(o.require("port"), o.path_of("port"), 1, 65535));
    const JsonValue* protocols = o.get("protocols");
    if (protocols) s.protocols = read_protocols(*protocols, o.path_of("protocols"));
    const JsonValue* backends = o.get("backends");
    if (backends) read_backends(*backends, o.path_of("backends"), s);
    if (auto* b = o.get("balance")) {
      s.balance =
          read_choice<BalancePolicy>(*b, o.path_of("balance"),
                                     {{"maglev", BalancePolicy::maglev},
                                      {"round_robin", BalancePolicy::round_robin},
                                      {"least_connections", BalancePolicy::least_connections}});
    }
    const JsonValue* mode = o.get("mode");
    if (mode) {
      s.mode = read_choice<ServiceMode>(*mode, o.path_of("mode"),
                                        {{"proxy", ServiceMode::proxy},
                                         {"echo", ServiceMode::echo},
                                         {"reflect", ServiceMode::reflect}});
    }
    if (auto* f = o.get("forwarding")) {
      s.forwarding = read_choice<Forwarding>(
          *f, o.path_of("forwarding"),
          {{"nat", Forwarding::nat}, {"ipip", Forwarding::ipip}, {"gue", Forwarding::gue}});
    }
    if (auto* a = o.get("affinity")) {
      s.affinity = read_choice<Affinity>(*a, o.path_of("affinity"),
                                         {{"flow", Affinity::flow}, {"none", Affinity::none}});
    }
    if (auto* h = o.get("health"); h && h->kind != Kind::null) {
      expect(*h, o.path_of("health"), Kind::object, "an object or null");
      s.health = read_health(*this, *h, o.path_of("health"), s.protocols);
    }
    if (auto* m = o.get("max_connections")) {
      s.max_connections = read_u32(*m, o.path_of("max_connections"), 0, 16777216);
    }
    if (auto* q = o.get("quic_lb"); q && q->kind != Kind::null) {
      s.quic_lb = read_quic_lb(*this, *q, o.path_of("quic_lb"));
    }
    check_service_mode(o, s, mode, protocols, backends);
    read_proxy_protocol(o, s);
    check_quic_lb_service(*this, s, v, path);
    check_forwarding_service(*this, s, xdp_, v, path);
    return s;
  }

  // The PROXY protocol keys (docs/proxy.md): only a TCP proxy service has a TCP connection to
  // read a header from and backends to write one to.
  void read_proxy_protocol(const ObjectReader& o, ServiceConfig& s) const {
    for (std::string_view key : {"proxy_protocol", "accept_proxy_protocol"}) {
      const JsonValue* v = o.get(key);
      if (v == nullptr) continue;
      const std::string path = o.path_of(key);
      if (key == "proxy_protocol") {
        if (v->kind == Kind::null) continue;
        s.proxy_protocol = read_choice<ProxyProtocol>(
            *v, path, {{"v1", ProxyProtocol::v1}, {"v2", ProxyProtocol::v2}});
      } else {
        expect(*v, path, Kind::boolean, "true or false");
        s.accept_proxy_protocol = v->boolean;
        if (!s.accept_proxy_protocol) continue;
      }
      if (s.mode != ServiceMode::proxy) {
        fail(v->position, path,
             fmt::format("applies to TCP services in mode 'proxy', not mode '{}'; remove it",
                         to_string(s.mode)));
      }
      if (!s.protocols.tcp) {
        fail(v->position, path,
             "applies to TCP proxy services and this one serves UDP only; add \"tcp\" to "
             "\"protocols\" or remove it");
      }
    }
  }

  void check_service_name(const JsonValue& v, const std::string& path) const {
    const std::string& name = v.text;
    bool ok = !name.empty() && name.size() <= 64;
    for (char c : name) {
      ok = ok && ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-');
    }
    if (!ok) {
      fail(v.position, path,
           fmt::format("{} is not a valid service name (1..64 of A-Z a-z 0-9 _ . -)",
                       in_quotes(name)));
    }
  }

  // Each entry is "ADDRESS:PORT" (weight 1) or {"address": "ADDRESS:PORT", "weight": W,
  // "server_id": "HEX"} (the QUIC-LB server ID, checked against quic_lb afterwards).
  void read_backends(const JsonValue& v, const std::string& path, ServiceConfig& s) const {
    expect(v, path, Kind::array,
           "an array of \"ADDRESS:PORT\" strings and {\"address\", \"weight\", \"server_id\"} "
           "objects");
    std::unordered_map<std::string, SourcePosition> seen;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& item = v.items[i];
      std::string item_path = element(path, i);
      const JsonValue* address = &item;
      std::string address_path = item_path;
      std::uint32_t weight = 1;
      ServerId server_id;
      if (item.kind == Kind::object) {
        ObjectReader o(*this, item, item_path, {"address", "weight", "server_id"});
        address = &o.require("address");
        address_path = o.path_of("address");
        if (auto* w = o.get("weight")) {
          weight = read_u32(*w, o.path_of("weight"), 0, ServiceConfig::kMaxWeight);
        }
        if (auto* id = o.get("server_id"))
          server_id = read_server_id(*this, *id, o.path_of("server_id"));
      } else if (item.kind != Kind::string) {
        fail(item.position, item_path,
             fmt::format("expected \"ADDRESS:PORT\" or {{\"address\": \"ADDRESS:PORT\", "
                         "\"weight\": 0..{}}}, got {}",
                         ServiceConfig::kMaxWeight, describe(item)));
      }
      net::Endpoint e = read_endpoint(*address, address_path);
      check_backend(e, *address, address_path, s.vip);
      if (auto [it, inserted] = seen.emplace(e.to_string(), item.position); !inserted) {
        fail(address->position, address_path,
             fmt::format("duplicate backend {} (first listed at {})", e.to_string(),
                         position_text(it->second)));
      }
      s.backends.push_back(e);
      s.backend_weights.push_back(weight);
      s.backend_server_ids.push_back(std::move(server_id));
    }
    // Only a service that gives server IDs keeps the list (a config built by hand has none).
    bool any_server_id = false;
    for (const auto& id : s.backend_server_ids) any_server_id = any_server_id || !id.empty();
    if (!any_server_id) s.backend_server_ids.clear();
  }

  void check_backend(const net::Endpoint& e, const JsonValue& at, const std::string& path,
                     const net::IpAddress& vip) const {
    if (e.port == 0) fail(at.position, path, "port 0 is not a backend port (1..65535)");
    if (e.address.family != vip.family) {
      fail(
          at.position, path,
          fmt::format("{} is {} but the vip {} is {}; a backend must have the vip's address family",
                      e.to_string(), e.address.is_v4() ? "IPv4" : "IPv6", vip.to_string(),
                      vip.is_v4() ? "IPv4" : "IPv6"));
    }
  }

  // What a mode can serve: proxy forwards to backends; echo is the TCP runtime answering itself;
  // reflect is the XDP path bouncing UDP back. Each error points at the key to change.
  void check_service_mode(const ObjectReader& o, const ServiceConfig& s, const JsonValue* mode,
                          const JsonValue* protocols, const JsonValue* backends) const {
    std::string_view mode_name = to_string(s.mode);
    if (s.mode == ServiceMode::proxy) {
      if (!s.backends.empty()) return;
      if (backends) {
        fail(backends->position, o.path_of("backends"),
             "mode 'proxy' needs at least one backend \"ADDRESS:PORT\"");
      }
      fail(o.value().position, o.path(),
           "mode 'proxy' (the default) needs 'backends'; or set \"mode\" to \"echo\" or "
           "\"reflect\"");
    }
    if (!s.backends.empty()) {
      fail(backends->position, o.path_of("backends"),
           fmt::format("mode '{}' takes no backends; remove 'backends' or use mode 'proxy'",
                       mode_name));
    }
    bool wants_tcp = s.mode == ServiceMode::echo;
    if (s.protocols.udp == wants_tcp || s.protocols.tcp != wants_tcp) {
      const JsonValue& at = protocols ? *protocols : *mode;
      fail(at.position, protocols ? o.path_of("protocols") : o.path_of("mode"),
           fmt::format("mode '{}' serves {} only; set \"protocols\": [\"{}\"]", mode_name,
                       wants_tcp ? "TCP" : "UDP", protocol_name(wants_tcp)));
    }
  }

 private:
  const XdpConfig& xdp_;
};

}  // namespace

std::vector<ServiceConfig> read_services(const SchemaReader& reader, const JsonValue& v,
                                         const std::string& path, const XdpConfig& xdp) {
  std::vector<ServiceConfig> out;
  ServiceReader(reader, xdp).read_services(v, path, out);
  return out;
}

}  // namespace ferry::config::schema
