// Validates the config tree section by section into a Config. Every error names the key path
// (services[1].port) and says what is accepted; defaults come from the structs in config.hh.
// The services section is validate_service.cc; the value readers are schema_reader.cc.
#include "lib/config/validate.hh"

#include <fmt/format.h>
#include <sys/un.h>

#include <map>
#include <unordered_map>
#include <vector>

#include "lib/config/did_you_mean.hh"
#include "lib/config/schema_reader.hh"
#include "lib/config/validate_encap.hh"
#include "lib/config/validate_service.hh"

namespace ferry::config {
namespace {

using namespace schema;

class Validator : public SchemaReader {
 public:
  explicit Validator(const std::string& source_name) : SchemaReader(source_name) {}

  Config run(const JsonValue& root) {
    if (root.kind != Kind::object) {
      fail(root.position, "",
           fmt::format("the config must be a JSON object, got {}", describe(root)));
    }
    ObjectReader top(*this, root, "",
                     {"control", "metrics", "log", "xdp", "tcp", "services", "routes", "announce"});
    Config c;
    if (auto* v = top.get("control")) read_control(*v, "control", c.control);
    if (auto* v = top.get("metrics")) read_metrics(*v, "metrics", c.metrics);
    if (auto* v = top.get("log")) read_log(*v, "log", c.log);
    if (auto* v = top.get("xdp")) read_xdp(*v, "xdp", c.xdp);
    if (auto* v = top.get("tcp")) read_tcp(*v, "tcp", c.tcp);
    if (auto* v = top.get("services")) c.services = read_services(*this, *v, "services", c.xdp);
    if (auto* v = top.get("routes")) read_routes(*v, "routes", c.xdp, c.routes);
    if (auto* v = top.get("announce"); v && v->kind != Kind::null) {
      c.announce = read_announce(*v, "announce");
      check_min_backends(*v, *c.announce, c.services);
    }
    return c;
  }

 private:
  void read_control(const JsonValue& v, const std::string& path, ControlConfig& out) const {
    ObjectReader o(*this, v, path,
                   {"socket", "mode", "group", "max_connections", "admin_reserved_connections",
                    "max_connections_per_uid", "tcp"});
    if (auto* s = o.get("socket")) {
      out.socket = read_absolute_path(*s, o.path_of("socket"));
      constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un::sun_path) - 1;
      if (out.socket.size() > kMaxSocketPath) {
        fail(s->position, o.path_of("socket"),
             fmt::format("path is {} bytes; a Unix socket path may be at most {}",
                         out.socket.size(), kMaxSocketPath));
      }
    }
    if (auto* m = o.get("mode")) out.mode = read_file_mode(*m, o.path_of("mode"));
    if (auto* g = o.get("group")) {
      if (g->kind == Kind::null) {
        out.group.reset();
      } else {
        const std::string& name = read_string(*g, o.path_of("group"), "a group name or null");
        bool ok = !name.empty();
        for (char c : name) ok = ok && c != ':' && c != '/' && c != ' ' && c != '\t' && c != '\n';
        if (!ok) {
          fail(g->position, o.path_of("group"),
               fmt::format("{} is not a group name (non-empty; no ':', '/' or whitespace)",
                           in_quotes(name)));
        }
        out.group = name;
      }
    }
    read_u32_key(o, "max_connections", 16, 65536, out.max_connections);
    read_u32_key(o, "admin_reserved_connections", 1, 65535, out.admin_reserved_connections);
    read_u32_key(o, "max_connections_per_uid", 1, 65536, out.max_connections_per_uid);
    const JsonValue* unauthenticated = nullptr;
    if (auto* t = o.get("tcp")) {
      ObjectReader tcp(*this, *t, o.path_of("tcp"),
                       {"listen", "token_file", "max_unauthenticated",
                        "max_unauthenticated_per_source", "auth_timeout_ms"});
      if (auto* l = tcp.get("listen"))
        out.tcp.listen = read_optional_endpoint(*l, tcp.path_of("listen"));
      if (auto* f = tcp.get("token_file"); f && f->kind != Kind::null) {
        expect(*f, tcp.path_of("token_file"), Kind::string, "a string (an absolute path) or null");
        out.tcp.token_file = read_absolute_path(*f, tcp.path_of("token_file"));
      }
      if (out.tcp.listen && !out.tcp.token_file) {
        fail(t->position, tcp.path(),
             "'token_file' is required when 'listen' is set (TCP clients authenticate with it)");
      }
      unauthenticated =
          read_u32_key(tcp, "max_unauthenticated", 1, 65535, out.tcp.max_unauthenticated);
      read_u32_key(tcp, "max_unauthenticated_per_source", 1, 65535,
                   out.tcp.max_unauthenticated_per_source);
      read_u32_key(tcp, "auth_timeout_ms", 100, 60000, out.tcp.auth_timeout_ms);
      check_at_most(tcp, "max_unauthenticated_per_source", out.tcp.max_unauthenticated_per_source,
                    "max_unauthenticated", out.tcp.max_unauthenticated);
    }
    check_control_shares(o, unauthenticated, out);
  }

  // Reads an optional integer key into `out`; returns its value node (nullptr when absent).
  const JsonValue* read_u32_key(const ObjectReader& o, std::string_view key, std::int64_t lo,
                                std::int64_t hi, std::uint32_t& out) const {
    const JsonValue* n = o.get(key);
    if (n) out = read_u32(*n, o.path_of(key), lo, hi);
    return n;
  }

  // `key` (a share of `whole`) may not exceed it; the error points at whichever was written.
  void check_at_most(const ObjectReader& o, std::string_view key, std::uint32_t value,
                     std::string_view whole, std::uint32_t whole_value) const {
    if (value <= whole_value) return;
    if (const JsonValue* at = o.get(key)) {
      fail(at->position, o.path_of(key),
           fmt::format("{} is more than {} ({})", value, whole, whole_value));
    }
    const JsonValue* at = o.get(whole);
    fail(
        at ? at->position : o.value().position, o.path_of(whole),
        fmt::format("{} is less than {} ({}, its default); set that too", whole_value, key, value));
  }

  // The admin reserve and (with TCP control on) the unauthenticated pool come out of
  // max_connections; local non-admin peers share the rest, which must not be empty.
  void check_control_shares(const ObjectReader& o, const JsonValue* unauthenticated,
                            const ControlConfig& c) const {
    std::uint64_t pool = c.tcp.listen ? c.tcp.max_unauthenticated : 0;
    if (c.admin_reserved_connections + pool < c.max_connections) return;
    const JsonValue* at = o.get("max_connections");
    if (!at) at = o.get("admin_reserved_connections");
    if (!at && c.tcp.listen) at = unauthenticated;
    fail(at ? at->position : o.value().position, o.path(),
         fmt::format("admin_reserved_connections {}{} leaves no connection of max_connections {} "
                     "to the other local peers; raise max_connections or lower the reserve",
                     c.admin_reserved_connections,
                     c.tcp.listen ? fmt::format(" + tcp.max_unauthenticated {}", pool) : "",
                     c.max_connections));
  }

  mode_t read_file_mode(const JsonValue& v, const std::string& path) const {
    const std::string& text = read_string(v, path, "a string of octal digits such as \"0660\"");
    bool octal = !text.empty() && text.size() <= 4;
    unsigned mode = 0;
    for (char c : text) {
      octal = octal && c >= '0' && c <= '7';
      mode = mode * 8 + static_cast<unsigned>(c - '0');
    }
    if (!octal) {
      fail(v.position, path,
           fmt::format("{} is not an octal file mode such as \"0660\"", in_quotes(text)));
    }
    if (mode > 0777) {
      fail(v.position, path,
           fmt::format("{} is out of range (\"0000\"..\"0777\")", in_quotes(text)));
    }
    return static_cast<mode_t>(mode);
  }

  void read_metrics(const JsonValue& v, const std::string& path, MetricsConfig& out) const {
    ObjectReader o(
        *this, v, path,
        {"listen", "max_connections", "max_connections_per_source", "request_timeout_ms"});
    if (auto* l = o.get("listen")) out.listen = read_optional_endpoint(*l, o.path_of("listen"));
    read_u32_key(o, "max_connections", 1, 65536, out.max_connections);
    read_u32_key(o, "max_connections_per_source", 1, 65536, out.max_connections_per_source);
    read_u32_key(o, "request_timeout_ms", 100, 60000, out.request_timeout_ms);
    check_at_most(o, "max_connections_per_source", out.max_connections_per_source,
                  "max_connections", out.max_connections);
  }

  void read_log(const JsonValue& v, const std::string& path, LogConfig& out) const {
    ObjectReader o(*this, v, path, {"level"});
    if (auto* l = o.get("level")) {
      out.level = read_choice<std::string_view>(*l, o.path_of("level"),
                                                {{"debug", "debug"},
                                                 {"info", "info"},
                                                 {"notice", "notice"},
                                                 {"warning", "warning"},
                                                 {"error", "error"}});
    }
  }

  void read_xdp(const JsonValue& v, const std::string& path, XdpConfig& out) const {
    ObjectReader o(*this, v, path, {"interfaces", "umem", "rings", "flows", "drop", "encap"});
    if (auto* list = o.get("interfaces")) {
      std::string list_path = o.path_of("interfaces");
      expect(*list, list_path, Kind::array, "an array of interface objects");
      std::unordered_map<std::string, SourcePosition> seen;
      for (std::size_t i = 0; i < list->items.size(); ++i) {
        out.interfaces.push_back(read_interface(list->items[i], element(list_path, i), seen));
      }
    }
    if (auto* u = o.get("umem")) {
      ObjectReader umem(*this, *u, o.path_of("umem"), {"frames", "frame_bytes"});
      if (auto* f = umem.get("frames")) {
        out.umem.frames = read_power_of_two(*f, umem.path_of("frames"), 64, 1048576);
      }
      if (auto* b = umem.get("frame_bytes")) {
        std::int64_t n = read_integer(*b, umem.path_of("frame_bytes"), 2048, 4096);
        if (n != 2048 && n != 4096) {
          fail(b->position, umem.path_of("frame_bytes"),
               fmt::format("{} must be 2048 or 4096", printable(b->text)));
        }
        out.umem.frame_bytes = static_cast<std::uint32_t>(n);
      }
    }
    if (auto* r = o.get("rings")) {
      ObjectReader rings(*this, *r, o.path_of("rings"), {"fill", "completion", "rx", "tx"});
      auto ring = [&](std::string_view key, std::uint32_t& size) {
        if (auto* n = rings.get(key)) size = read_power_of_two(*n, rings.path_of(key), 64, 65536);
      };
      ring("fill", out.rings.fill);
      ring("completion", out.rings.completion);
      ring("rx", out.rings.rx);
      ring("tx", out.rings.tx);
    }
    if (auto* f = o.get("flows")) read_flows(*f, o.path_of("flows"), out.flows);
    if (auto* e = o.get("encap"); e && e->kind != Kind::null) {
      out.encap = read_encap(*this, *e, o.path_of("encap"));
    }
    if (auto* d = o.get("drop")) {
      std::string drop_path = o.path_of("drop");
      expect(*d, drop_path, Kind::array, "an array of CIDR prefix strings");
      std::map<std::string, std::size_t> seen;
      for (std::size_t i = 0; i < d->items.size(); ++i) {
        net::Prefix p = read_prefix(d->items[i], element(drop_path, i));
        auto [it, inserted] = seen.emplace(p.to_string(), i);
        if (!inserted) {
          fail(d->items[i].position, element(drop_path, i),
               fmt::format("{} is already listed at {}", p.to_string(),
                           element(drop_path, it->second)));
        }
        out.drop.push_back(p);
      }
    }
  }

  void read_flows(const JsonValue& v, const std::string& path, FlowTableConfig& out) const {
    ObjectReader o(*this, v, path, {"entries", "idle_timeout_ms"});
    if (auto* n = o.get("entries")) {
      out.entries = read_u32(*n, o.path_of("entries"), 0, 16777216);
      if (out.entries != 0 && !is_power_of_two(out.entries)) {
        fail(n->position, o.path_of("entries"),
             fmt::format("{} is not a power of two (the flow table is a power-of-two hash table; "
                         "0 turns it off)",
                         out.entries));
      }
    }
    if (auto* n = o.get("idle_timeout_ms"))
      out.idle_timeout_ms = read_u32(*n, o.path_of("idle_timeout_ms"), 1000, 3600000);
  }

  XdpInterfaceConfig read_interface(const JsonValue& v, const std::string& path,
                                    std::unordered_map<std::string, SourcePosition>& seen) const {
    ObjectReader o(*this, v, path, {"name", "queues", "mode", "zerocopy"});
    XdpInterfaceConfig out;
    const JsonValue& name = o.require("name");
    out.name = read_string(name, o.path_of("name"), "a string (an interface name)");
    check_interface_name(name, o.path_of("name"));
    if (auto [it, inserted] = seen.emplace(out.name, name.position); !inserted) {
      fail(name.position, o.path_of("name"),
           fmt::format("duplicate interface {} (first defined at {})", in_quotes(out.name),
                       position_text(it->second)));
    }
    if (auto* q = o.get("queues")) out.queues = read_queues(*q, o.path_of("queues"));
    if (auto* m = o.get("mode")) {
      out.mode = read_choice<XdpMode>(*m, o.path_of("mode"),
                                      {{"auto", XdpMode::automatic},
                                       {"native", XdpMode::native},
                                       {"generic", XdpMode::generic}});
    }
    if (auto* z = o.get("zerocopy")) out.zerocopy = read_tristate(*z, o.path_of("zerocopy"));
    return out;
  }

  void check_interface_name(const JsonValue& v, const std::string& path) const {
    const std::string& name = v.text;
    constexpr std::size_t kMaxInterfaceName = 15;  // IFNAMSIZ - 1
    if (name.empty() || name.size() > kMaxInterfaceName) {
      fail(v.position, path,
           fmt::format("{} is {} bytes; an interface name is 1..{} (IFNAMSIZ)", in_quotes(name),
                       name.size(), kMaxInterfaceName));
    }
    bool ok = name != "." && name != "..";
    for (char c : name) {
      ok = ok && c != '/' && c != ':' && c != ' ' && c != '\t' && c != '\n' && c != '\r' &&
           c != '\v' && c != '\f';
    }
    if (!ok) {
      fail(v.position, path,
           fmt::format("{} is not a valid interface name (no '/', ':' or whitespace)",
                       in_quotes(name)));
    }
  }

  std::optional<std::vector<std::uint32_t>> read_queues(const JsonValue& v,
                                                        const std::string& path) const {
    if (v.kind == Kind::string) {
      if (v.text == "all") return std::nullopt;
      fail(v.position, path,
           fmt::format("{} is not \"all\" or an array of queue numbers", in_quotes(v.text)));
    }
    expect(v, path, Kind::array, "\"all\" or an array of queue numbers (0..255)");
    if (v.items.empty()) fail(v.position, path, "must list at least one queue, or be \"all\"");
    std::vector<std::uint32_t> queues;
    std::map<std::uint32_t, std::size_t> seen;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      auto q = read_u32(v.items[i], element(path, i), 0, 255);
      if (auto [it, inserted] = seen.emplace(q, i); !inserted) {
        fail(v.items[i].position, element(path, i),
             fmt::format("queue {} is already listed at {}", q, element(path, it->second)));
      }
      queues.push_back(q);
    }
    return queues;
  }

  Tristate read_tristate(const JsonValue& v, const std::string& path) const {
    return read_choice<Tristate>(
        v, path, {{"auto", Tristate::automatic}, {"on", Tristate::on}, {"off", Tristate::off}});
  }

  void read_tcp(const JsonValue& v, const std::string& path, TcpConfig& out) const {
    ObjectReader o(*this, v, path, {"workers", "buffers", "scheduler", "proxy"});
    if (auto* w = o.get("workers")) out.workers = read_u32(*w, o.path_of("workers"), 1, 256);
    if (auto* b = o.get("buffers")) {
      ObjectReader buffers(
          *this, *b, o.path_of("buffers"),
          {"count", "bytes", "bundle", "incremental", "recv_credit_bytes", "recv_credit_idle_ms"});
      if (auto* n = buffers.get("count")) {
        out.buffers.count = read_power_of_two(*n, buffers.path_of("count"), 1, 32768);
      }
      if (auto* n = buffers.get("bytes")) {
        out.buffers.bytes = read_u32(*n, buffers.path_of("bytes"), 512, 1048576);
      }
      if (auto* t = buffers.get("bundle"))
        out.buffers.bundle = read_tristate(*t, buffers.path_of("bundle"));
      if (auto* t = buffers.get("incremental")) {
        out.buffers.incremental = read_tristate(*t, buffers.path_of("incremental"));
      }
      if (auto* n = buffers.get("recv_credit_bytes")) {
        const std::string where = buffers.path_of("recv_credit_bytes");
        const std::uint32_t credit = read_u32(*n, where, 0, 1u << 30);
        const std::uint64_t ring = std::uint64_t{out.buffers.count} * out.buffers.bytes;
        if (credit != 0 && credit < 512) {
          fail(n->position, where, fmt::format("{} is below 512 (0 turns the credit off)", credit));
        }
        if (credit > ring) {
          fail(n->position, where,
               fmt::format("{} is more than the ring holds (count x bytes = {})", credit, ring));
        }
        out.buffers.recv_credit_bytes = credit;
      }
      if (auto* n = buffers.get("recv_credit_idle_ms")) {
        out.buffers.recv_credit_idle_ms =
            read_u32(*n, buffers.path_of("recv_credit_idle_ms"), 1, 60000);
      }
    }
    if (auto* s = o.get("scheduler")) {
      ObjectReader scheduler(*this, *s, o.path_of("scheduler"), {"io_ready"});
      if (auto* r = scheduler.get("io_ready")) {
        out.scheduler.io_ready = read_choice<IoReadyMode>(*r, scheduler.path_of("io_ready"),
                                                          {{"inbox", IoReadyMode::inbox},
                                                           {"global", IoReadyMode::global},
                                                           {"index", IoReadyMode::index}});
      }
    }
    if (auto* p = o.get("proxy")) read_proxy(*p, o.path_of("proxy"), out.proxy);
  }

  void read_proxy(const JsonValue& v, const std::string& path, ProxyConfig& out) const {
    ObjectReader o(*this, v, path,
                   {"connect_timeout_ms", "connect_attempts", "idle_timeout_ms", "drain_timeout_ms",
                    "high_water_bytes", "low_water_bytes", "max_connections"});
    if (auto* n = o.get("connect_timeout_ms"))
      out.connect_timeout_ms = read_u32(*n, o.path_of("connect_timeout_ms"), 1, 600000);
    if (auto* n = o.get("connect_attempts"))
      out.connect_attempts = read_u32(*n, o.path_of("connect_attempts"), 1, 16);
    if (auto* n = o.get("idle_timeout_ms")) {
      out.idle_timeout_ms = read_u32(*n, o.path_of("idle_timeout_ms"), 0, 86400000);
      if (out.idle_timeout_ms != 0 && out.idle_timeout_ms < 10) {
        fail(n->position, o.path_of("idle_timeout_ms"),
             fmt::format("{} is too short; use 0 (off) or 10..86400000", out.idle_timeout_ms));
      }
    }
    if (auto* n = o.get("drain_timeout_ms"))
      out.drain_timeout_ms = read_u32(*n, o.path_of("drain_timeout_ms"), 0, 3600000);
    const JsonValue* high = o.get("high_water_bytes");
    if (high) out.high_water_bytes = read_u32(*high, o.path_of("high_water_bytes"), 4096, 67108864);
    if (auto* n = o.get("low_water_bytes")) {
      out.low_water_bytes =
          read_u32(*n, o.path_of("low_water_bytes"), 0, std::int64_t{out.high_water_bytes} - 1);
    } else if (out.low_water_bytes >= out.high_water_bytes) {
      fail(high->position, o.path_of("high_water_bytes"),
           fmt::format("{} must be greater than low_water_bytes (default {}); set low_water_bytes "
                       "too",
                       out.high_water_bytes, out.low_water_bytes));
    }
    if (auto* n = o.get("max_connections"))
      out.max_connections = read_u32(*n, o.path_of("max_connections"), 1, 16777216);
  }

  AnnounceConfig read_announce(const JsonValue& v, const std::string& path) const {
    ObjectReader o(*this, v, path, {"table", "min_backends", "withdraw_grace_ms", "settle_ms"});
    AnnounceConfig out;
    if (auto* t = o.get("table")) {
      out.table = read_u32(*t, o.path_of("table"), 1, 4294967295);
      // The kernel's own tables: publishing there would make every VIP a route the host uses.
      if (out.table >= 253 && out.table <= 255) {
        fail(t->position, o.path_of("table"),
             fmt::format("{} is the kernel's {} table; use a table of ferry's own (e.g. 100) "
                         "that the routing daemon learns from",
                         out.table,
                         out.table == 253   ? "default"
                         : out.table == 254 ? "main"
                                            : "local"));
      }
    }
    if (auto* n = o.get("min_backends"))
      out.min_backends = read_u32(*n, o.path_of("min_backends"), 1, 65536);
    if (auto* n = o.get("withdraw_grace_ms"))
      out.withdraw_grace_ms = read_u32(*n, o.path_of("withdraw_grace_ms"), 0, 60000);
    if (auto* n = o.get("settle_ms"); n && n->kind != Kind::null)
      out.settle_ms = read_u32(*n, o.path_of("settle_ms"), 0, 600000);
    return out;
  }

  // A proxy service with fewer backends than min_backends would keep its VIP withdrawn forever.
  void check_min_backends(const JsonValue& v, const AnnounceConfig& announce,
                          const std::vector<ServiceConfig>& services) const {
    for (const auto& s : services) {
      std::size_t weighted = 0;  // a backend of weight 0 is never usable
      for (std::size_t i = 0; i < s.backends.size(); ++i) weighted += s.weight(i) > 0;
      if (s.mode != ServiceMode::proxy || weighted >= announce.min_backends) continue;
      const JsonValue* at = v.find("min_backends");
      fail(at ? at->position : v.position, "announce.min_backends",
           fmt::format("{} is more than service {} has backends of weight above 0 ({}): its VIP "
                       "{} would never be announced",
                       announce.min_backends, in_quotes(s.name), weighted, s.vip.to_string()));
    }
  }

  void read_routes(const JsonValue& v, const std::string& path, const XdpConfig& xdp,
                   std::vector<RouteConfig>& out) const {
    expect(v, path, Kind::array, "an array of route objects");
    std::vector<std::string_view> interfaces;
    for (const auto& i : xdp.interfaces) interfaces.push_back(i.name);
    // "prefix|proto" -> index of the route that has it
    std::unordered_map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      std::string item_path = element(path, i);
      ObjectReader o(*this, v.items[i], item_path, {"prefix", "via", "protocols"});
      RouteConfig r;
      const JsonValue& prefix = o.require("prefix");
      r.prefix = read_prefix(prefix, o.path_of("prefix"));
      const JsonValue& via = o.require("via");
      r.via = read_string(via, o.path_of("via"), "a string (one of xdp.interfaces[].name)");
      bool known = false;
      for (std::string_view name : interfaces) known = known || name == r.via;
      if (!known) {
        std::string message =
            fmt::format("{} is not an interface in xdp.interfaces", in_quotes(r.via));
        if (interfaces.empty()) {
          message += " (none are configured)";
        } else if (auto guess = closest_match(r.via, interfaces)) {
          message += fmt::format(" (did you mean '{}'?)", *guess);
        } else {
          message += fmt::format(" ({})", join(interfaces));
        }
        fail(via.position, o.path_of("via"), std::move(message));
      }
      if (auto* p = o.get("protocols")) r.protocols = read_protocols(*p, o.path_of("protocols"));
      for (bool tcp : {false, true}) {
        if (!(tcp ? r.protocols.tcp : r.protocols.udp)) continue;
        auto [it, inserted] =
            seen.emplace(fmt::format("{}|{}", r.prefix.to_string(), protocol_name(tcp)), i);
        if (!inserted) {
          fail(prefix.position, o.path_of("prefix"),
               fmt::format("{} ({}) is already routed by {}", r.prefix.to_string(),
                           protocol_name(tcp), element(path, it->second)));
        }
      }
      out.push_back(std::move(r));
    }
  }
};

}  // namespace

Config validate_config(const JsonValue& root, const std::string& source_name) {
  return Validator(source_name).run(root);
}

}  // namespace ferry::config
