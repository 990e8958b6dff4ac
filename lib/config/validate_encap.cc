// xdp.encap and the services that encapsulate ("forwarding": "ipip" | "gue", docs/dsr.md): the
// packet reaches the backend unchanged inside an outer header, and the backend answers the client
// itself, so no proxy terminates the connection and nothing is rewritten on the way.
#include "lib/config/validate_encap.hh"

#include <optional>
#include <string_view>

namespace ferry::config::schema {
namespace {

constexpr int kMinSourcePrefixLength = 8;

std::string_view family_name(bool v4) {
  return v4 ? "IPv4" : "IPv6";
}

// "source" (IPv4) or "source6" (IPv6): a specific address of the wanted family, or null.
std::optional<net::IpAddress> read_source(const SchemaReader& r, const ObjectReader& o,
                                          std::string_view key, bool v4) {
  const JsonValue* v = o.get(key);
  if (v == nullptr || v->kind == Kind::null) return std::nullopt;
  const std::string path = o.path_of(key);
  r.expect(*v, path, Kind::string,
           fmt::format("a string (an {} address) or null", family_name(v4)));
  net::IpAddress a = r.read_address(*v, path);
  if (a.is_v4() != v4) {
    r.fail(v->position, path,
           fmt::format("{} is {}; '{}' is the outer {} source ({} sources go in '{}')",
                       in_quotes(v->text), family_name(!v4), key, family_name(v4), family_name(!v4),
                       v4 ? "source6" : "source"));
  }
  if (is_unspecified(a)) {
    r.fail(v->position, path,
           fmt::format("{} is the unspecified address; the outer source must be a specific "
                       "address of this host",
                       in_quotes(v->text)));
  }
  return a;
}

void read_source_prefix(const SchemaReader& r, const ObjectReader& o, EncapConfig& out) {
  const JsonValue* v = o.get("source_prefix");
  if (v == nullptr || v->kind == Kind::null) return;
  const std::string path = o.path_of("source_prefix");
  r.expect(*v, path, Kind::string,
           "a string (an IPv4 CIDR prefix such as \"10.0.0.0/28\") or null");
  net::Prefix p = r.read_prefix(*v, path);
  if (!p.address.is_v4()) {
    r.fail(v->position, path,
           fmt::format("{} is IPv6; outer sources vary within an IPv4 prefix only (IPv6 packets "
                       "always leave from 'source6')",
                       in_quotes(v->text)));
  }
  if (p.length < kMinSourcePrefixLength) {
    r.fail(v->position, path,
           fmt::format("/{} is too wide; the prefix length must be {}..32", p.length,
                       kMinSourcePrefixLength));
  }
  if (!out.source) {
    r.fail(v->position, path,
           "needs 'source', an address within it (the outer source of packets that do not vary "
           "it, and of GUE)");
  }
  if (!p.contains(*out.source)) {
    r.fail(v->position, path,
           fmt::format("{} does not contain 'source' {}; the outer sources vary within this "
                       "prefix, so it must hold the source",
                       p.to_string(), out.source->to_string()));
  }
  out.source_prefix = p;
}

// The node of backend `i`'s address: the string itself or the object's "address".
const JsonValue& backend_address(const JsonValue& backends, std::size_t i, std::string& path) {
  const JsonValue& item = backends.items[i];
  if (item.kind != Kind::object) return item;
  path = child(path, "address");
  return *item.find("address");
}

// The TCP proxy's keys: with the packets forwarded, no connection ends at ferry for them to act on.
void check_no_proxy_keys(const SchemaReader& r, const ServiceConfig& s, const JsonValue& item,
                         const std::string& path) {
  struct ProxyKey {
    std::string_view key;
    bool set;
    std::string_view why;
  };
  const ProxyKey keys[] = {
      {"proxy_protocol", s.proxy_protocol != ProxyProtocol::off,
       "there is no connection to the backend to write a PROXY header on (the backend sees the "
       "client's own address)"},
      {"accept_proxy_protocol", s.accept_proxy_protocol,
       "nothing reads the clients' bytes, so a PROXY header would reach the backend as data"},
      {"max_connections", s.max_connections != 0,
       "there are no proxied connections to count or cap"},
  };
  for (const ProxyKey& k : keys) {
    if (!k.set) continue;
    r.fail(item.find(k.key)->position, child(path, k.key),
           fmt::format("with forwarding '{}' no proxy terminates the connections (the fast path "
                       "forwards the packets and the backend answers the client directly), so {}; "
                       "remove it",
                       to_string(s.forwarding), k.why));
  }
}

}  // namespace

EncapConfig read_encap(const SchemaReader& r, const JsonValue& v, const std::string& path) {
  ObjectReader o(r, v, path, {"source", "source_prefix", "source6", "gue_port"});
  EncapConfig out;
  out.source = read_source(r, o, "source", true);
  out.source6 = read_source(r, o, "source6", false);
  read_source_prefix(r, o, out);
  if (const JsonValue* n = o.get("gue_port")) {
    out.gue_port = static_cast<std::uint16_t>(r.read_integer(*n, o.path_of("gue_port"), 1, 65535));
  }
  if (!out.source && !out.source6) {
    r.fail(v.position, path,
           "needs 'source' (the outer IPv4 source, for IPv4 backends), 'source6' (IPv6), or both");
  }
  return out;
}

void check_forwarding_service(const SchemaReader& r, const ServiceConfig& s, const XdpConfig& xdp,
                              const JsonValue& item, const std::string& path) {
  if (s.forwarding == Forwarding::nat) return;
  const JsonValue& forwarding = *item.find("forwarding");
  const std::string forwarding_path = child(path, "forwarding");
  const std::string_view name = to_string(s.forwarding);
  if (s.mode != ServiceMode::proxy) {
    r.fail(forwarding.position, forwarding_path,
           fmt::format("'{}' forwards to backends and mode '{}' has none; remove it, or use mode "
                       "'proxy'",
                       name, to_string(s.mode)));
  }
  if (xdp.interfaces.empty()) {
    r.fail(forwarding.position, forwarding_path,
           fmt::format("'{}' runs on the XDP fast path and xdp.interfaces is empty; list the "
                       "interface the vip is reached through",
                       name));
  }
  if (!xdp.encap) {
    r.fail(forwarding.position, forwarding_path,
           fmt::format("'{}' needs xdp.encap, the outer header's source address (e.g. \"xdp\": "
                       "{{\"encap\": {{\"source\": \"10.0.0.1\"}}}})",
                       name));
  }
  const JsonValue& backends = *item.find("backends");
  for (std::size_t i = 0; i < s.backends.size(); ++i) {
    const net::Endpoint& b = s.backends[i];
    std::string address_path = element(child(path, "backends"), i);
    const JsonValue& address = backend_address(backends, i, address_path);
    if (b.port != s.port) {
      r.fail(address.position, address_path,
             fmt::format("{} is on port {}, not the service's port {}; with forwarding '{}' the "
                         "packet reaches the backend unchanged, addressed to the vip {} port {}, "
                         "so the backend must serve that port (write {})",
                         b.to_string(), b.port, s.port, name, s.vip.to_string(), s.port,
                         net::Endpoint{b.address, s.port}.to_string()));
    }
    const bool v4 = b.address.is_v4();
    if (!(v4 ? xdp.encap->source : xdp.encap->source6)) {
      r.fail(
          address.position, address_path,
          fmt::format("{} is {} and xdp.encap has no '{}', the outer {} source; set it",
                      b.to_string(), family_name(v4), v4 ? "source" : "source6", family_name(v4)));
    }
  }
  check_no_proxy_keys(r, s, item, path);
}

}  // namespace ferry::config::schema
