// Validates the config tree section by section into a Config. Every error names the key path
// (services[1].port) and says what is accepted; defaults come from the structs in config.hh.
#include "lib/config/validate.hh"

#include <fmt/format.h>
#include <sys/un.h>

#include <cmath>
#include <initializer_list>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lib/config/did_you_mean.hh"

namespace ferry::config {
namespace {

using Kind = JsonValue::Kind;

// Operator text inside a message: control characters escaped, long text cut at a character
// boundary, so a message is one readable line whatever the file holds.
std::string printable(std::string_view s) {
  constexpr std::size_t kMaxShownBytes = 80;
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (i >= kMaxShownBytes && (c & 0xc0) != 0x80) {
      out += "...";
      break;
    }
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string in_quotes(std::string_view s) {
  return "'" + printable(s) + "'";
}

std::string describe(const JsonValue& v) {
  switch (v.kind) {
    case Kind::null:
      return "null";
    case Kind::boolean:
      return v.boolean ? "true" : "false";
    case Kind::number:
      return printable(v.text);
    case Kind::string:
      return "the string " + in_quotes(v.text);
    case Kind::array:
      return "an array";
    case Kind::object:
      return "an object";
  }
  return "?";
}

std::string join(std::span<const std::string_view> words) {
  std::string out;
  for (std::string_view w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

std::string position_text(SourcePosition p) {
  return fmt::format("{}:{}", p.line, p.column);
}

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string element(const std::string& path, std::size_t index) {
  return fmt::format("{}[{}]", path, index);
}

bool is_power_of_two(std::int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

bool is_unspecified(const net::IpAddress& a) {
  for (auto b : a.bytes) {
    if (b != 0) return false;
  }
  return true;
}

std::string_view protocol_name(bool tcp) {
  return tcp ? "tcp" : "udp";
}

class Validator;

// One JSON object of the schema: checks its type and that every key is one it accepts.
class ObjectReader {
 public:
  ObjectReader(const Validator& validator, const JsonValue& value, std::string path,
               std::initializer_list<std::string_view> keys);

  const JsonValue* get(std::string_view key) const { return value_.find(key); }
  const JsonValue& require(std::string_view key) const;
  std::string path_of(std::string_view key) const { return child(path_, key); }
  const std::string& path() const { return path_; }
  const JsonValue& value() const { return value_; }

 private:
  const Validator& validator_;
  const JsonValue& value_;
  std::string path_;
};

class Validator {
 public:
  explicit Validator(const std::string& source_name) : source_name_(source_name) {}

  [[noreturn]] void fail(SourcePosition at, const std::string& path, std::string message) const {
    throw ConfigError(source_name_, at.line, at.column,
                      path.empty() ? std::move(message) : fmt::format("{}: {}", path, message));
  }

  Config run(const JsonValue& root) {
    if (root.kind != Kind::object) {
      fail(root.position, "",
           fmt::format("the config must be a JSON object, got {}", describe(root)));
    }
    ObjectReader top(*this, root, "",
                     {"control", "metrics", "log", "xdp", "tcp", "services", "routes"});
    Config c;
    if (auto* v = top.get("control")) read_control(*v, "control", c.control);
    if (auto* v = top.get("metrics")) read_metrics(*v, "metrics", c.metrics);
    if (auto* v = top.get("log")) read_log(*v, "log", c.log);
    if (auto* v = top.get("xdp")) read_xdp(*v, "xdp", c.xdp);
    if (auto* v = top.get("tcp")) read_tcp(*v, "tcp", c.tcp);
    if (auto* v = top.get("services")) read_services(*v, "services", c.services);
    if (auto* v = top.get("routes")) read_routes(*v, "routes", c.xdp, c.routes);
    return c;
  }

 private:
  const std::string& source_name_;

  // ---- scalars ----

  void expect(const JsonValue& v, const std::string& path, Kind kind, std::string_view what) const {
    if (v.kind != kind)
      fail(v.position, path, fmt::format("expected {}, got {}", what, describe(v)));
  }

  const std::string& read_string(const JsonValue& v, const std::string& path,
                                 std::string_view what = "a string") const {
    expect(v, path, Kind::string, what);
    return v.text;
  }

  std::int64_t read_integer(const JsonValue& v, const std::string& path, std::int64_t lo,
                            std::int64_t hi) const {
    if (v.kind != Kind::number) {
      fail(v.position, path,
           fmt::format("expected an integer ({}..{}), got {}", lo, hi, describe(v)));
    }
    if (!v.integer && std::trunc(v.number) != v.number) {
      fail(v.position, path, fmt::format("{} is not an integer", printable(v.text)));
    }
    if (!v.integer || *v.integer < lo || *v.integer > hi) {
      fail(v.position, path, fmt::format("{} is out of range ({}..{})", printable(v.text), lo, hi));
    }
    return *v.integer;
  }

  std::uint32_t read_u32(const JsonValue& v, const std::string& path, std::int64_t lo,
                         std::int64_t hi) const {
    return static_cast<std::uint32_t>(read_integer(v, path, lo, hi));
  }

  std::uint32_t read_power_of_two(const JsonValue& v, const std::string& path, std::int64_t lo,
                                  std::int64_t hi) const {
    std::int64_t n = read_integer(v, path, lo, hi);
    if (!is_power_of_two(n)) {
      fail(v.position, path, fmt::format("{} is not a power of two", printable(v.text)));
    }
    return static_cast<std::uint32_t>(n);
  }

  template <typename E>
  E read_choice(const JsonValue& v, const std::string& path,
                std::initializer_list<std::pair<std::string_view, E>> choices) const {
    std::vector<std::string_view> names;
    for (const auto& [name, value] : choices) names.push_back(name);
    expect(v, path, Kind::string, fmt::format("a string, one of {}", join(names)));
    for (const auto& [name, value] : choices) {
      if (v.text == name) return value;
    }
    std::string message = fmt::format("{} is not one of {}", in_quotes(v.text), join(names));
    if (auto guess = closest_match(v.text, names)) {
      message += fmt::format(" (did you mean '{}'?)", *guess);
    }
    fail(v.position, path, std::move(message));
  }

  std::string read_absolute_path(const JsonValue& v, const std::string& path) const {
    const std::string& text = read_string(v, path, "a string (an absolute path)");
    if (text.empty() || text.front() != '/') {
      fail(v.position, path, fmt::format("{} is not an absolute path", in_quotes(text)));
    }
    return text;
  }

  net::Endpoint read_endpoint(const JsonValue& v, const std::string& path) const {
    const std::string& text = read_string(v, path, "a string \"ADDRESS:PORT\"");
    auto e = net::Endpoint::parse(text);
    if (!e) {
      fail(v.position, path,
           fmt::format("{} is not ADDRESS:PORT (e.g. \"127.0.0.1:9469\" or \"[::1]:9469\")",
                       in_quotes(text)));
    }
    return *e;
  }

  std::optional<net::Endpoint> read_optional_endpoint(const JsonValue& v,
                                                      const std::string& path) const {
    if (v.kind == Kind::null) return std::nullopt;
    expect(v, path, Kind::string, "a string \"ADDRESS:PORT\" or null");
    return read_endpoint(v, path);
  }

  net::IpAddress read_address(const JsonValue& v, const std::string& path) const {
    const std::string& text = read_string(v, path, "a string (an IPv4 or IPv6 address)");
    auto a = net::IpAddress::parse(text);
    if (!a) {
      fail(v.position, path, fmt::format("{} is not an IPv4 or IPv6 address", in_quotes(text)));
    }
    return *a;
  }

  net::Prefix read_prefix(const JsonValue& v, const std::string& path) const {
    const std::string& text =
        read_string(v, path, "a string (a CIDR prefix such as \"192.0.2.0/24\")");
    std::string why;
    auto p = net::Prefix::parse(text, &why);
    if (!p)
      fail(v.position, path, fmt::format("{} is not a CIDR prefix: {}", in_quotes(text), why));
    return *p;
  }

  Protocols read_protocols(const JsonValue& v, const std::string& path) const {
    expect(v, path, Kind::array, "an array of \"udp\" and/or \"tcp\"");
    if (v.items.empty()) fail(v.position, path, "must list at least one of \"udp\", \"tcp\"");
    Protocols p;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& item = v.items[i];
      std::string item_path = element(path, i);
      bool tcp = read_choice<bool>(item, item_path, {{"udp", false}, {"tcp", true}});
      bool& seen = tcp ? p.tcp : p.udp;
      if (seen) fail(item.position, item_path, fmt::format("'{}' is listed twice", item.text));
      seen = true;
    }
    return p;
  }

  // ---- sections ----

  void read_control(const JsonValue& v, const std::string& path, ControlConfig& out) const {
    ObjectReader o(*this, v, path, {"socket", "mode", "group", "tcp"});
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
    if (auto* t = o.get("tcp")) {
      ObjectReader tcp(*this, *t, o.path_of("tcp"), {"listen", "token_file"});
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
    }
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
    ObjectReader o(*this, v, path, {"listen"});
    if (auto* l = o.get("listen")) out.listen = read_optional_endpoint(*l, o.path_of("listen"));
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
    ObjectReader o(*this, v, path, {"interfaces", "umem", "rings", "drop"});
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

  void read_services(const JsonValue& v, const std::string& path,
                     std::vector<ServiceConfig>& out) const {
    expect(v, path, Kind::array, "an array of service objects");
    std::unordered_map<std::string, SourcePosition> names;
    // "vip|port|proto" -> index of the service that serves it
    std::unordered_map<std::string, std::size_t> listeners;
    // backend "ip:port" -> index of the UDP proxy service it serves
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
      // backend cannot serve two UDP services: its replies could not be told apart.
      if (s.protocols.udp && s.mode == ServiceMode::proxy) {
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
    ObjectReader o(*this, v, path,
                   {"name", "vip", "port", "protocols", "backends", "balance", "mode", "health",
                    "max_connections"});
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
    if (backends) s.backends = read_backends(*backends, o.path_of("backends"), s.vip);
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
    if (auto* h = o.get("health"); h && h->kind != Kind::null) {
      expect(*h, o.path_of("health"), Kind::object, "an object or null");
      s.health = read_health(*h, o.path_of("health"));
    }
    if (auto* m = o.get("max_connections")) {
      s.max_connections = read_u32(*m, o.path_of("max_connections"), 0, 16777216);
    }
    check_service_mode(o, s, mode, protocols, backends);
    return s;
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

  std::vector<net::Endpoint> read_backends(const JsonValue& v, const std::string& path,
                                           const net::IpAddress& vip) const {
    expect(v, path, Kind::array, "an array of \"ADDRESS:PORT\" strings");
    std::vector<net::Endpoint> backends;
    std::unordered_map<std::string, SourcePosition> seen;
    for (std::size_t i = 0; i < v.items.size(); ++i) {
      const JsonValue& item = v.items[i];
      std::string item_path = element(path, i);
      net::Endpoint e = read_endpoint(item, item_path);
      if (e.port == 0) fail(item.position, item_path, "port 0 is not a backend port (1..65535)");
      if (e.address.family != vip.family) {
        fail(item.position, item_path,
             fmt::format(
                 "{} is {} but the vip {} is {}; a backend must have the vip's address family",
                 e.to_string(), e.address.is_v4() ? "IPv4" : "IPv6", vip.to_string(),
                 vip.is_v4() ? "IPv4" : "IPv6"));
      }
      if (auto [it, inserted] = seen.emplace(e.to_string(), item.position); !inserted) {
        fail(item.position, item_path,
             fmt::format("duplicate backend {} (first listed at {})", e.to_string(),
                         position_text(it->second)));
      }
      backends.push_back(e);
    }
    return backends;
  }

  HealthCheckConfig read_health(const JsonValue& v, const std::string& path) const {
    ObjectReader o(*this, v, path, {"interval_ms", "timeout_ms", "rise", "fall"});
    HealthCheckConfig h;
    const JsonValue* interval = o.get("interval_ms");
    if (interval) h.interval_ms = read_u32(*interval, o.path_of("interval_ms"), 10, 3600000);
    if (auto* t = o.get("timeout_ms")) {
      h.timeout_ms = read_u32(*t, o.path_of("timeout_ms"), 1, std::int64_t{h.interval_ms} - 1);
    } else if (h.timeout_ms >= h.interval_ms) {
      fail(interval->position, o.path_of("interval_ms"),
           fmt::format("{} must be greater than timeout_ms (default {}); set timeout_ms too",
                       h.interval_ms, h.timeout_ms));
    }
    if (auto* r = o.get("rise")) h.rise = read_u32(*r, o.path_of("rise"), 1, 100);
    if (auto* f = o.get("fall")) h.fall = read_u32(*f, o.path_of("fall"), 1, 100);
    return h;
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

  friend class ObjectReader;
};

ObjectReader::ObjectReader(const Validator& validator, const JsonValue& value, std::string path,
                           std::initializer_list<std::string_view> keys)
    : validator_(validator), value_(value), path_(std::move(path)) {
  if (value.kind != Kind::object) {
    validator_.fail(value.position, path_,
                    fmt::format("expected an object {{...}}, got {}", describe(value)));
  }
  std::vector<std::string_view> accepted(keys);
  for (const JsonMember& m : value.members) {
    bool known = false;
    for (std::string_view k : accepted) known = known || k == m.key;
    if (known) continue;
    std::string where = path_.empty() ? "at the top level" : "in " + path_;
    std::string message = fmt::format("unknown key {} {}", in_quotes(m.key), where);
    if (auto guess = closest_match(m.key, accepted)) {
      message += fmt::format(" (did you mean '{}'?)", *guess);
    } else {
      message += fmt::format(" (accepted: {})", join(accepted));
    }
    validator_.fail(m.key_position, "", std::move(message));
  }
}

const JsonValue& ObjectReader::require(std::string_view key) const {
  const JsonValue* v = get(key);
  if (!v) {
    validator_.fail(value_.position, path_, fmt::format("missing required key '{}'", key));
  }
  return *v;
}

}  // namespace

Config validate_config(const JsonValue& root, const std::string& source_name) {
  return Validator(source_name).run(root);
}

}  // namespace ferry::config
