// The effective config as JSON in the file's own shape, so `ferryctl config` output can be saved
// and loaded again unchanged (parse_config(to_json(c).dump()) == c), with one exception: a QUIC-LB
// key is a secret and is written as "(set)", which the file must replace with the key again.
#include <fmt/format.h>

#include "lib/config/config.hh"

namespace ferry::config {
namespace {

using json = nlohmann::json;

json endpoint_or_null(const std::optional<net::Endpoint>& e) {
  return e ? json(e->to_string()) : json(nullptr);
}

json protocols_json(const Protocols& p) {
  json out = json::array();
  if (p.udp) out.push_back("udp");
  if (p.tcp) out.push_back("tcp");
  return out;
}

json control_json(const ControlConfig& c) {
  return {{"socket", c.socket},
          {"mode", fmt::format("{:04o}", static_cast<unsigned>(c.mode))},
          {"group", c.group ? json(*c.group) : json(nullptr)},
          {"max_connections", c.max_connections},
          {"admin_reserved_connections", c.admin_reserved_connections},
          {"max_connections_per_uid", c.max_connections_per_uid},
          {"tcp",
           {{"listen", endpoint_or_null(c.tcp.listen)},
            {"token_file", c.tcp.token_file ? json(*c.tcp.token_file) : json(nullptr)},
            {"max_unauthenticated", c.tcp.max_unauthenticated},
            {"max_unauthenticated_per_source", c.tcp.max_unauthenticated_per_source},
            {"auth_timeout_ms", c.tcp.auth_timeout_ms}}}};
}

json metrics_json(const MetricsConfig& m) {
  return {{"listen", endpoint_or_null(m.listen)},
          {"max_connections", m.max_connections},
          {"max_connections_per_source", m.max_connections_per_source},
          {"request_timeout_ms", m.request_timeout_ms}};
}

json address_or_null(const std::optional<net::IpAddress>& a) {
  return a ? json(a->to_string()) : json(nullptr);
}

json encap_json(const std::optional<EncapConfig>& e) {
  if (!e) return nullptr;
  return {{"source", address_or_null(e->source)},
          {"source_prefix", e->source_prefix ? json(e->source_prefix->to_string()) : json(nullptr)},
          {"source6", address_or_null(e->source6)},
          {"gue_port", e->gue_port}};
}

json xdp_json(const XdpConfig& x) {
  json interfaces = json::array();
  for (const auto& i : x.interfaces) {
    interfaces.push_back({{"name", i.name},
                          {"queues", i.queues ? json(*i.queues) : json("all")},
                          {"mode", to_string(i.mode)},
                          {"zerocopy", to_string(i.zerocopy)}});
  }
  json drop = json::array();
  for (const auto& p : x.drop) drop.push_back(p.to_string());
  return {{"interfaces", std::move(interfaces)},
          {"umem", {{"frames", x.umem.frames}, {"frame_bytes", x.umem.frame_bytes}}},
          {"rings",
           {{"fill", x.rings.fill},
            {"completion", x.rings.completion},
            {"rx", x.rings.rx},
            {"tx", x.rings.tx}}},
          {"flows", {{"entries", x.flows.entries}, {"idle_timeout_ms", x.flows.idle_timeout_ms}}},
          {"drop", std::move(drop)},
          {"encap", encap_json(x.encap)}};
}

json tcp_json(const TcpConfig& t) {
  return {{"workers", t.workers},
          {"buffers",
           {{"count", t.buffers.count},
            {"bytes", t.buffers.bytes},
            {"bundle", to_string(t.buffers.bundle)},
            {"incremental", to_string(t.buffers.incremental)},
            {"recv_credit_bytes", t.buffers.recv_credit_bytes},
            {"recv_credit_idle_ms", t.buffers.recv_credit_idle_ms}}},
          {"scheduler", {{"io_ready", to_string(t.scheduler.io_ready)}}},
          {"proxy",
           {{"connect_timeout_ms", t.proxy.connect_timeout_ms},
            {"connect_attempts", t.proxy.connect_attempts},
            {"idle_timeout_ms", t.proxy.idle_timeout_ms},
            {"drain_timeout_ms", t.proxy.drain_timeout_ms},
            {"high_water_bytes", t.proxy.high_water_bytes},
            {"low_water_bytes", t.proxy.low_water_bytes},
            {"max_connections", t.proxy.max_connections}}}};
}

// Printable ASCII as "send"/"expect" text, anything else as hex, so the bytes round-trip.
void payload_json(json& out, const std::string& key, const std::string& bytes) {
  bool text = true;
  for (char c : bytes) text = text && c >= 0x20 && c < 0x7f;
  if (text) {
    out[key] = bytes;
    return;
  }
  std::string hex;
  for (char c : bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(c));
  out[key + "_hex"] = hex;
}

// Only the keys of the check's type, each with its effective value (null: the backend's own).
json health_json(const HealthCheckConfig& h) {
  json out = {{"type", to_string(h.type)},
              {"port", h.port ? json(*h.port) : json(nullptr)},
              {"interval_ms", h.interval_ms},
              {"timeout_ms", h.timeout_ms},
              {"rise", h.rise},
              {"fall", h.fall}};
  switch (h.type) {
    case HealthCheckType::tcp:
      break;
    case HealthCheckType::udp:
      payload_json(out, "send", h.send);
      if (h.expect) {
        payload_json(out, "expect", *h.expect);
      } else {
        out["expect"] = nullptr;
      }
      break;
    case HealthCheckType::dns: {
      json rcodes = json::array();
      for (std::size_t r = 0; r < kDnsRcodeNames.size(); ++r) {
        if (h.rcodes & (1u << r)) rcodes.push_back(kDnsRcodeNames[r]);
      }
      out["name"] = h.name;
      out["qtype"] = to_string(h.qtype);
      out["rcodes"] = std::move(rcodes);
      break;
    }
    case HealthCheckType::http:
      out["path"] = h.path;
      out["host"] = h.host ? json(*h.host) : json(nullptr);
      out["expect_status"] = {h.status_low, h.status_high};
      break;
  }
  return out;
}

json proxy_protocol_json(ProxyProtocol p) {
  if (p == ProxyProtocol::off) return nullptr;
  return p == ProxyProtocol::v1 ? "v1" : "v2";
}

// The key never leaves the file: "(set)" says there is one, null that the CIDs are plaintext.
json quic_lb_json(const std::optional<QuicLbConfig>& q) {
  if (!q) return nullptr;
  json configs = json::array();
  for (const auto& c : q->configs) {
    configs.push_back({{"id", c.id},
                       {"server_id_bytes", c.server_id_bytes},
                       {"nonce_bytes", c.nonce_bytes},
                       {"key", c.key ? json("(set)") : json(nullptr)}});
  }
  return {{"configs", std::move(configs)}};
}

json service_json(const ServiceConfig& s) {
  json backends = json::array();
  for (std::size_t i = 0; i < s.backends.size(); ++i) {
    // Weight 1 in the file's short form, so a config without weights prints as it was written.
    const std::uint32_t weight = s.weight(i);
    const ServerId* server_id = s.server_id(i);
    if (weight == 1 && server_id == nullptr) {
      backends.push_back(s.backends[i].to_string());
    } else {
      json b = {{"address", s.backends[i].to_string()}};
      if (weight != 1) b["weight"] = weight;
      if (server_id) b["server_id"] = server_id_text(*server_id);
      backends.push_back(std::move(b));
    }
  }
  json health = s.health ? health_json(*s.health) : json(nullptr);
  return {{"name", s.name},
          {"vip", s.vip.to_string()},
          {"port", s.port},
          {"protocols", protocols_json(s.protocols)},
          {"backends", std::move(backends)},
          {"balance", to_string(s.balance)},
          {"affinity", to_string(s.affinity)},
          {"mode", to_string(s.mode)},
          {"forwarding", to_string(s.forwarding)},
          {"health", std::move(health)},
          {"max_connections", s.max_connections},
          {"proxy_protocol", proxy_protocol_json(s.proxy_protocol)},
          {"accept_proxy_protocol", s.accept_proxy_protocol},
          {"quic_lb", quic_lb_json(s.quic_lb)}};
}

}  // namespace

nlohmann::json to_json(const Config& config) {
  json services = json::array();
  for (const auto& s : config.services) services.push_back(service_json(s));
  json routes = json::array();
  for (const auto& r : config.routes) {
    routes.push_back({{"prefix", r.prefix.to_string()},
                      {"via", r.via},
                      {"protocols", protocols_json(r.protocols)}});
  }
  return {{"control", control_json(config.control)},
          {"metrics", metrics_json(config.metrics)},
          {"log", {{"level", config.log.level}}},
          {"xdp", xdp_json(config.xdp)},
          {"tcp", tcp_json(config.tcp)},
          {"services", std::move(services)},
          {"routes", std::move(routes)},
          {"announce",
           config.announce
               ? json{{"table", config.announce->table},
                      {"min_backends", config.announce->min_backends},
                      {"withdraw_grace_ms", config.announce->withdraw_grace_ms},
                      {"settle_ms", config.announce->settle_ms ? json(*config.announce->settle_ms)
                                                               : json(nullptr)}}
               : json(nullptr)}};
}

}  // namespace ferry::config
