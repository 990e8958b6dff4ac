// What `ferryctl top` shows (see top_view.hh): which counters make each figure.
#include "lib/ctl/top_view.hh"

#include <algorithm>
#include <tuple>

namespace ferry::ctl {
namespace {

using json = nlohmann::json;

std::optional<double> bits(std::optional<double> bytes_per_second) {
  if (!bytes_per_second) return std::nullopt;
  return *bytes_per_second * 8;
}

// Sum of the reasons' rates, empty when no reason has a rate yet.
std::optional<double> total_of(const std::map<std::string, double>& by_reason) {
  if (by_reason.empty()) return std::nullopt;
  double sum = 0;
  for (const auto& [reason, rate] : by_reason) sum += rate;
  return sum;
}

void add_reason(std::map<std::string, double>& by_reason, const std::string& reason,
                std::optional<double> rate) {
  if (rate) by_reason[reason] += *rate;
}

std::string text_of(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "-";
  return format_value(*it);
}

// The fast path: the XDP program counts each service's frames to its VIP and its backends'
// replies, the workers what they sent to each backend and on from it (`family` ..._packets_total
// and ..._bytes_total, `match` the service or the backend). An encapsulating service's backends
// answer the clients directly: nothing comes back, and "out" has no counter. Drops are the fast
// path's, not a service's (see TopView::fastpath_drops).
TopFigures fastpath_figures(const StatsIndex& stats, const std::string& family, LabelMatch match,
                            bool encapsulates) {
  TopFigures f;
  LabelMatch in = match, out = std::move(match);
  in.emplace_back("direction", "in");
  out.emplace_back("direction", "out");
  f.in_pps = stats.rate(family + "_packets_total", in);
  f.in_bps = bits(stats.rate(family + "_bytes_total", in));
  if (encapsulates) return f;
  f.out_pps = stats.rate(family + "_packets_total", out);
  f.out_bps = bits(stats.rate(family + "_bytes_total", out));
  return f;
}

// TCP through the proxy: bytes each way, open connections; drops are connections a cap refused,
// errors those reset for lack of a backend, by an error on either side, or failed accepts.
TopFigures proxy_figures(const StatsIndex& stats, const std::string& service) {
  TopFigures f;
  LabelMatch match{{"service", service}};
  f.in_bps = bits(stats.rate("ferry_proxy_bytes_in_total", match));
  f.out_bps = bits(stats.rate("ferry_proxy_bytes_out_total", match));
  f.active = stats.value("ferry_proxy_connections_active", match);
  f.drops_by_reason = stats.rates_by("ferry_proxy_connections_refused_total", "reason", match);
  f.drops_per_second = total_of(f.drops_by_reason);
  add_reason(f.errors_by_reason, "no_backend",
             stats.rate("ferry_proxy_connections_failed_total", match));
  // Resets count idle timeouts too, which are not errors.
  if (auto resets = stats.rate("ferry_proxy_resets_total", match)) {
    double idle = stats.rate("ferry_proxy_idle_timeouts_total", match).value_or(0);
    f.errors_by_reason["reset"] = std::max(0.0, *resets - idle);
  }
  add_reason(f.errors_by_reason, "accept", stats.rate("ferry_proxy_accept_errors_total", match));
  f.errors_per_second = total_of(f.errors_by_reason);
  return f;
}

TopFigures proxy_backend_figures(const StatsIndex& stats, const std::string& service,
                                 const std::string& backend) {
  TopFigures f;
  LabelMatch match{{"service", service}, {"backend", backend}};
  f.in_bps = bits(stats.rate("ferry_proxy_backend_bytes_in_total", match));
  f.out_bps = bits(stats.rate("ferry_proxy_backend_bytes_out_total", match));
  f.active = stats.value("ferry_proxy_backend_connections_active", match);
  add_reason(f.errors_by_reason, "connect",
             stats.rate("ferry_proxy_backend_connect_failures_total", match));
  f.errors_per_second = total_of(f.errors_by_reason);
  return f;
}

// An echo service sends back what it receives: the same bytes each way.
TopFigures echo_figures(const StatsIndex& stats, const std::string& service) {
  TopFigures f;
  LabelMatch match{{"service", service}};
  f.in_bps = bits(stats.rate("ferry_tcp_echo_bytes_total", match));
  f.out_bps = f.in_bps;
  f.active = stats.value("ferry_tcp_connections_open", match);
  add_reason(f.errors_by_reason, "accept", stats.rate("ferry_tcp_accept_errors_total", match));
  f.errors_per_second = total_of(f.errors_by_reason);
  return f;
}

TopFigures fastpath_drops(const StatsIndex& stats) {
  TopFigures f;
  f.drops_by_reason = stats.rates_by("ferry_xsk_drops_total", "reason");
  for (const auto& [reason, rate] : stats.rates_by("ferry_xsk_kernel_drops_total", "reason")) {
    f.drops_by_reason["kernel_" + reason] += rate;
  }
  add_reason(f.drops_by_reason, "xdp_drop_prefix",
             stats.rate("ferry_xdp_packets_total", {{"action", "drop"}}));
  f.drops_per_second = total_of(f.drops_by_reason);
  return f;
}

std::string endpoint_of(const json& service) {
  std::string vip = text_of(service, "vip");
  if (vip.find(':') != std::string::npos) vip = "[" + vip + "]";
  if (service.contains("port") && !service["port"].is_null()) {
    vip += ":" + format_value(service["port"]);
  }
  return vip;
}

double traffic_of(const TopFigures& f) {
  return f.in_bps.value_or(0) + f.out_bps.value_or(0);
}

}  // namespace

TopView build_top_view(const json& services_result, const StatsIndex& stats, TopSort sort) {
  TopView view;
  view.traffic = gateway_traffic(stats);
  if (view.traffic.fastpath) view.fastpath_drops = fastpath_drops(stats);

  const json* services = nullptr;
  if (services_result.is_object()) {
    auto it = services_result.find("services");
    if (it != services_result.end() && it->is_array()) services = &*it;
  }
  if (!services) return view;
  for (const json& service : *services) {
    if (!service.is_object()) continue;
    auto paths = service.find("paths");
    if (paths == service.end() || !paths->is_object()) continue;
    const std::string name = text_of(service, "name");
    const bool reflect = text_of(service, "mode") == "reflect";
    // Direct server return: the fast path balances both protocols per packet, and counts them
    // together (per service and per backend): one row for both.
    const std::string forwarding = text_of(service, "forwarding");  // "-" from an older ferryd
    const bool encapsulates = forwarding != "nat" && forwarding != "-";
    std::vector<std::string> protocols;
    for (const char* protocol : {"udp", "tcp"}) {
      if (paths->contains(protocol)) protocols.emplace_back(protocol);
    }
    if (encapsulates && protocols.size() == 2) protocols = {"udp,tcp"};
    for (const std::string& protocol : protocols) {
      TopRow row;
      row.service = name;
      row.protocol = protocol;
      row.endpoint = endpoint_of(service);
      row.path = text_of(*paths, protocol == "udp,tcp" ? "udp" : protocol.c_str());
      if (reflect) row.path += " reflect";
      if (encapsulates) row.path += " " + forwarding;
      const bool proxied = row.path == "proxy";
      const bool fastpath = protocol == "udp" || encapsulates;
      if (fastpath) {
        row.figures =
            fastpath_figures(stats, "ferry_xdp_service", {{"service", name}}, encapsulates);
      } else if (proxied) {
        row.figures = proxy_figures(stats, name);
      } else {
        row.figures = echo_figures(stats, name);
      }
      auto backends = service.find("backends");
      if (backends != service.end() && backends->is_array() && !backends->empty()) {
        row.backends_total = static_cast<int>(backends->size());
        row.backends_up = 0;
        for (const json& b : *backends) {
          if (!b.is_object()) continue;
          TopBackend backend{text_of(b, "address"), text_of(b, "state"), "", std::nullopt, {}};
          if (b.contains("admin") && b["admin"].is_string()) backend.admin = b["admin"];
          if (b.contains("weight") && b["weight"].is_number()) backend.weight = b["weight"];
          // `up` is whether it takes traffic: a backend without health checks always does.
          bool up = b.contains("up") ? b["up"] == true : backend.state == "up";
          if (b.value("checked", true) == false && up) backend.state = "unchecked";
          if (up) ++*row.backends_up;
          if (proxied) {
            backend.figures = proxy_backend_figures(stats, name, backend.address);
          } else if (fastpath && !reflect) {
            backend.figures =
                fastpath_figures(stats, "ferry_xsk_backend",
                                 {{"service", name}, {"backend", backend.address}}, encapsulates);
          }
          row.backends.push_back(std::move(backend));
        }
      }
      view.rows.push_back(std::move(row));
    }
  }
  std::stable_sort(view.rows.begin(), view.rows.end(), [&](const TopRow& a, const TopRow& b) {
    if (sort == TopSort::traffic && traffic_of(a.figures) != traffic_of(b.figures)) {
      return traffic_of(a.figures) > traffic_of(b.figures);
    }
    return std::tie(a.service, a.protocol) < std::tie(b.service, b.protocol);
  });
  return view;
}

}  // namespace ferry::ctl
