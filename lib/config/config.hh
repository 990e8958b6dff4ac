// The operator's configuration as typed values, with every default in one place.
// load_config() parses JSON-with-comments and validates it; errors carry FILE:LINE:COL.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/net.hh"

namespace ferry::config {

// "auto" | "on" | "off" switches for probed kernel features.
enum class Tristate { automatic, on, off };
enum class XdpMode { automatic, native, generic };
enum class IoReadyMode { inbox, global, index };
enum class BalancePolicy { maglev, round_robin, least_connections };
// proxy: forward to backends (balance for UDP, L4 proxy for TCP); echo: TCP echo on the io_uring
// runtime; reflect: UDP swap-and-return on the AF_XDP path.
enum class ServiceMode { proxy, echo, reflect };
// UDP: "flow" keeps an established flow on its backend through backend changes (the per-worker
// flow table, xdp.flows); "none" is pure Maglev, for query/response services such as DNS.
enum class Affinity { flow, none };
// The PROXY protocol header a TCP proxy service writes to its backends (docs/proxy.md).
enum class ProxyProtocol { off, v1, v2 };
// How a proxy service's packets reach its backends: nat rewrites them (UDP on the fast path, TCP
// through the proxy) and the replies come back through ferry; ipip and gue encapsulate them
// unchanged (IP-in-IP, or GUE over UDP) on the fast path, and the backends reply to the client
// directly: direct server return (docs/dsr.md).
enum class Forwarding : std::uint8_t { nat, ipip, gue };

struct Protocols {
  bool udp = false;
  bool tcp = false;
  bool operator==(const Protocols&) const = default;
};

struct TcpControlConfig {
  std::optional<net::Endpoint> listen;    // null: TCP control off (the default)
  std::optional<std::string> token_file;  // required when listen is set
  // Connections that have not sent their token yet: a pool of their own, a budget per source
  // address within it, and a deadline for the auth line (docs/control-protocol.md).
  std::uint32_t max_unauthenticated = 64;            // 1..65535, below max_connections - reserve
  std::uint32_t max_unauthenticated_per_source = 8;  // 1..max_unauthenticated
  std::uint32_t auth_timeout_ms = 3000;              // 100..60000
  bool operator==(const TcpControlConfig&) const = default;
};

struct ControlConfig {
  std::string socket = "/run/ferry/ferryd.sock";
  mode_t mode = 0660;
  std::optional<std::string> group = "ferry";  // null: keep the daemon's primary group
  // Connection budgets (docs/control-protocol.md, "Connection budgets").
  std::uint32_t max_connections = 1024;           // 16..65536, Unix and TCP together
  std::uint32_t admin_reserved_connections = 64;  // 1..max_connections - 1, admin peers only
  std::uint32_t max_connections_per_uid = 32;     // 1..max_connections, each non-admin uid
  TcpControlConfig tcp;
  bool operator==(const ControlConfig&) const = default;
};

struct MetricsConfig {
  std::optional<net::Endpoint> listen = net::Endpoint::parse("127.0.0.1:9469");  // null: off
  std::uint32_t max_connections = 256;                                           // 1..65536
  std::uint32_t max_connections_per_source = 8;  // 1..max_connections, per client address
  std::uint32_t request_timeout_ms = 3000;       // 100..60000, for each request head
  bool operator==(const MetricsConfig&) const = default;
};

struct LogConfig {
  std::string level = "info";  // debug | info | notice | warning | error
  bool operator==(const LogConfig&) const = default;
};

struct XdpInterfaceConfig {
  std::string name;
  std::optional<std::vector<std::uint32_t>> queues;  // nullopt: "all" queues of the device
  XdpMode mode = XdpMode::automatic;
  Tristate zerocopy = Tristate::automatic;
  bool operator==(const XdpInterfaceConfig&) const = default;
};

struct UmemConfig {
  std::uint32_t frames = 16384;      // power of two, 64..1048576
  std::uint32_t frame_bytes = 4096;  // 2048 or 4096
  bool operator==(const UmemConfig&) const = default;
};

struct RingConfig {
  std::uint32_t fill = 4096;  // each a power of two, 64..65536
  std::uint32_t completion = 2048;
  std::uint32_t rx = 2048;
  std::uint32_t tx = 2048;
  bool operator==(const RingConfig&) const = default;
};

// The UDP flow table of each fast-path worker (services with "affinity": "flow").
struct FlowTableConfig {
  std::uint32_t entries = 65536;          // per worker; 0 (off) or a power of two up to 16777216
  std::uint32_t idle_timeout_ms = 30000;  // 1000..3600000; a flow idle this long is forgotten
  bool operator==(const FlowTableConfig&) const = default;
};

// xdp.encap: the outer headers of encapsulating services ("forwarding": "ipip" | "gue").
struct EncapConfig {
  std::optional<net::IpAddress> source;      // IPv4 outer source, for IPv4 backends
  std::optional<net::Prefix> source_prefix;  // IPv4, /8../32, holds `source`: IPIP outer sources
                                             // vary within it per flow; null: always `source`
  std::optional<net::IpAddress> source6;     // IPv6 outer source, for IPv6 backends
  std::uint16_t gue_port = 6080;             // GUE outer UDP destination port, 1..65535
  bool operator==(const EncapConfig&) const = default;
};

struct XdpConfig {
  std::vector<XdpInterfaceConfig> interfaces;
  UmemConfig umem;
  RingConfig rings;
  FlowTableConfig flows;
  std::vector<net::Prefix> drop;
  std::optional<EncapConfig> encap;  // null: no service may encapsulate
  bool operator==(const XdpConfig&) const = default;
};

struct BufferConfig {
  std::uint32_t count = 256;    // power of two, 1..32768
  std::uint32_t bytes = 16384;  // 512..1048576
  Tristate bundle = Tristate::automatic;
  Tristate incremental = Tristate::automatic;
  // Ring credit: most bytes one recv may take (0: off, a recv may find the ring dry and park on
  // ENOBUFS); explicit values must fit the ring (count x bytes), the default is clamped to it.
  std::uint32_t recv_credit_bytes = 65536;
  std::uint32_t recv_credit_idle_ms = 50;  // 1..60000: an idle recv's credit goes to waiters
  bool operator==(const BufferConfig&) const = default;
};

struct SchedulerConfig {
  IoReadyMode io_ready = IoReadyMode::inbox;
  bool operator==(const SchedulerConfig&) const = default;
};

// The L4 proxy of TCP services in mode proxy (docs/proxy.md).
struct ProxyConfig {
  std::uint32_t connect_timeout_ms = 2000;  // 1..600000, per backend attempt
  std::uint32_t connect_attempts = 3;       // 1..16 backends tried before the client is reset
  std::uint32_t idle_timeout_ms = 300000;   // 0 (off) or 10..86400000
  std::uint32_t drain_timeout_ms = 10000;   // 0..3600000, grace for connections on removal/stop
  std::uint32_t high_water_bytes = 1048576;  // 4096..67108864, unsent bytes held per direction
  std::uint32_t low_water_bytes = 65536;    // 0..high_water_bytes-1, receiving resumes below
  std::uint32_t max_connections = 65536;    // 1..16777216, proxied connections of all services
  bool operator==(const ProxyConfig&) const = default;
};

struct TcpConfig {
  std::uint32_t workers = 2;  // 1..256
  BufferConfig buffers;
  SchedulerConfig scheduler;
  ProxyConfig proxy;
  bool operator==(const TcpConfig&) const = default;
};

// What a health check speaks (docs/health.md): a TCP connect, a UDP datagram and its reply, a DNS
// query over UDP, an HTTP GET over TCP.
enum class HealthCheckType { tcp, udp, dns, http };
// The DNS query types a dns check may ask for, by their wire values.
enum class DnsQueryType : std::uint16_t { a = 1, ns = 2, soa = 6, aaaa = 28 };
// RCODE names by value (RFC 1035 4.1.1): what "rcodes" lists and failure reasons print.
inline constexpr std::array<std::string_view, 6> kDnsRcodeNames = {
    "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"};

struct HealthCheckConfig {
  std::uint32_t interval_ms = 1000;
  std::uint32_t timeout_ms = 500;  // < interval_ms
  std::uint32_t rise = 2;
  std::uint32_t fall = 3;
  HealthCheckType type = HealthCheckType::tcp;
  std::optional<std::uint16_t> port;  // null: the backend's own port
  // udp: the datagram sent, and what the reply must start with (null: any reply passes).
  std::string send;
  std::optional<std::string> expect;
  // dns: the question asked, and the RCODEs that pass (bit n set: RCODE n passes).
  std::string name = ".";
  DnsQueryType qtype = DnsQueryType::a;
  std::uint32_t rcodes = 1u << 0;  // NOERROR
  // http: GET path with Host host (null: the backend's address), passing statuses low..high.
  std::string path = "/";
  std::optional<std::string> host;
  std::uint16_t status_low = 200;
  std::uint16_t status_high = 399;
  bool operator==(const HealthCheckConfig&) const = default;
};

// One QUIC-LB configuration of a UDP service (docs/config.md, draft-ietf-quic-load-balancers-21):
// the servers behind the service encode their server ID in the connection IDs they issue, and the
// fast path decodes it, so a connection keeps its backend when the client's address changes.
struct QuicLbConfigEntry {
  std::uint8_t id = 0;               // config rotation codepoint, 0..6
  std::uint8_t server_id_bytes = 0;  // 1..15
  std::uint8_t nonce_bytes = 0;      // 4..18; server_id_bytes + nonce_bytes <= 19
  // AES-128; null: plaintext CIDs. Secret: to_json() writes "(set)" for it, and no message,
  // report, metric or log line carries it.
  std::optional<std::array<std::uint8_t, 16>> key;
  bool operator==(const QuicLbConfigEntry&) const = default;
};

struct QuicLbConfig {
  std::vector<QuicLbConfigEntry> configs;  // at least one, ids unique
  bool operator==(const QuicLbConfig&) const = default;
};

// A backend's QUIC-LB server ID: 1..15 octets, the length of a configuration's server_id_bytes.
using ServerId = std::vector<std::uint8_t>;
// Its text as the config writes it: two lowercase hex digits an octet ("0011").
std::string server_id_text(const ServerId& id);

struct ServiceConfig {
  std::string name;  // [A-Za-z0-9_.-]{1,64}, unique
  net::IpAddress vip;
  std::uint16_t port = 0;  // 1..65535
  Protocols protocols{.udp = true, .tcp = false};
  std::vector<net::Endpoint> backends;
  // Same order and length as `backends`: each backend's weight, 0..256 (1 for the plain
  // "ADDRESS:PORT" form; 0 = no new flows or connections, drained by configuration). A config
  // built by hand may leave it short or empty; read it with weight(i), which gives 1 then.
  std::vector<std::uint32_t> backend_weights;
  BalancePolicy balance = BalancePolicy::maglev;
  ServiceMode mode = ServiceMode::proxy;
  // ipip/gue: a proxy service on the fast path for both protocols (needs xdp.encap).
  Forwarding forwarding = Forwarding::nat;
  Affinity affinity = Affinity::flow;  // UDP, and TCP with forwarding ipip/gue; nat TCP ignores it
  std::optional<HealthCheckConfig> health;  // null: backends are always considered up
  std::uint32_t max_connections = 0;        // TCP proxy connections at once; 0 = no cap
  // TCP proxy: the PROXY protocol header written to backends, and whether clients start with one.
  ProxyProtocol proxy_protocol = ProxyProtocol::off;
  bool accept_proxy_protocol = false;
  // UDP proxy services: route QUIC packets by the server ID in their connection ID. null: off.
  std::optional<QuicLbConfig> quic_lb;
  // Same order as `backends` (may be short or empty): each backend's server ID, empty for none
  // (such a backend gets only the packets that fall back to the 4-tuple). Read with server_id(i).
  std::vector<ServerId> backend_server_ids;

  static constexpr std::uint32_t kMaxWeight = 256;
  std::uint32_t weight(std::size_t backend) const {
    return backend < backend_weights.size() ? backend_weights[backend] : 1;
  }
  const ServerId* server_id(std::size_t backend) const {
    return backend < backend_server_ids.size() && !backend_server_ids[backend].empty()
               ? &backend_server_ids[backend]
               : nullptr;
  }
  bool operator==(const ServiceConfig&) const = default;
};

struct RouteConfig {
  net::Prefix prefix;
  std::string via;  // egress interface; must be one of xdp.interfaces
  Protocols protocols{.udp = true, .tcp = false};
  bool operator==(const RouteConfig&) const = default;
};

// VIPs published as host routes in a kernel routing table of ferry's own, for a routing daemon
// (BIRD, FRR, GoBGP) to announce over BGP (docs/fleet.md). Absent: nothing is published.
struct AnnounceConfig {
  std::uint32_t table = 100;               // 1..4294967295 except 253..255 (default, main, local)
  std::uint32_t min_backends = 1;          // 1..65536 usable backends each service of a VIP needs
  std::uint32_t withdraw_grace_ms = 1000;  // 0..60000: serving on after withdrawing, on stop
  // 0..600000: a VIP that can serve is announced once its usable backends have held still this
  // long; null: twice the longest health check interval of its services (0 without checks).
  std::optional<std::uint32_t> settle_ms;
  bool operator==(const AnnounceConfig&) const = default;
};

struct Config {
  std::string source_path;  // the file this was read from
  ControlConfig control;
  MetricsConfig metrics;
  LogConfig log;
  XdpConfig xdp;
  TcpConfig tcp;
  std::vector<ServiceConfig> services;
  std::vector<RouteConfig> routes;
  std::optional<AnnounceConfig> announce;  // null: off
  // Field by field, source_path included; e.g. to tell whether a reload changes anything.
  bool operator==(const Config&) const = default;
};

// A rejected configuration: where, and why. what() is "FILE:LINE:COL: message"; for an error about
// the file as a whole (I/O, permissions, size) line and column are 0 and what() is "FILE: message".
class ConfigError : public std::runtime_error {
 public:
  ConfigError(std::string file, int line, int column, std::string message);
  const std::string& file() const { return file_; }
  int line() const { return line_; }
  int column() const { return column_; }
  const std::string& message() const { return message_; }

 private:
  std::string file_;
  int line_;
  int column_;
  std::string message_;
};

// Reads and validates `path`. Throws ConfigError (also for I/O errors, at line 0 col 0).
Config load_config(const std::string& path);
// Same, from text already in memory; `name` is used in error messages.
Config parse_config(const std::string& text, const std::string& name);

// The effective configuration, every default filled in, in the same shape as the file.
nlohmann::json to_json(const Config& config);

std::string_view to_string(Tristate v);
std::string_view to_string(XdpMode v);
std::string_view to_string(IoReadyMode v);
std::string_view to_string(BalancePolicy v);
std::string_view to_string(ServiceMode v);
std::string_view to_string(Affinity v);
std::string_view to_string(Forwarding v);
std::string_view to_string(HealthCheckType v);
std::string_view to_string(DnsQueryType v);

}  // namespace ferry::config
