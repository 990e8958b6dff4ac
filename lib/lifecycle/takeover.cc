// The new ferryd's side of a handover (ferryd --takeover SOCKET): ask the running ferryd for its
// kernel objects over its control socket, bring everything up on them without touching what it
// serves, have it stop its fast-path workers, start ours on the same rings, and only then accept
// on the handed-over listeners. A failure before that is told to the running ferryd, which
// serves on (docs/operations.md).
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "lib/admin/effective_config.hh"
#include "lib/common/log.hh"
#include "lib/common/time_text.hh"
#include "lib/lifecycle/daemon_state.hh"

namespace ferry::lifecycle {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kOfferTimeout{30000};
constexpr milliseconds kPausedTimeout{30000};
constexpr milliseconds kDoneTimeout{10000};

UniqueFd connect_to(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) throw std::runtime_error("--takeover: path too long");
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw std::runtime_error(fmt::format("--takeover: cannot reach the running ferryd at {}: {}",
                                         path, std::strerror(errno)));
  }
  const std::string request = "{\"cmd\":\"handover\"}\n";
  if (::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    throw std::runtime_error(
        fmt::format("--takeover: writing to {}: {}", path, std::strerror(errno)));
  }
  return fd;
}

// An fd of the offer by its index; none for -1 or null.
UniqueFd take_fd(std::vector<UniqueFd>& fds, const json& index) {
  if (!index.is_number_integer() || index.get<int>() < 0) return UniqueFd();
  auto i = index.get<std::size_t>();
  if (i >= fds.size()) throw std::runtime_error("the handover offer names an fd it did not send");
  return std::move(fds[i]);
}

void take_state(Daemon::State& s, const json& state) {
  for (const json& a : state.value("admin", json::array())) {
    auto backend = net::Endpoint::parse(a.value("backend", ""));
    auto st = admin::parse_admin_state(a.value("state", "enable"));
    if (!backend || !st) continue;
    std::optional<std::uint32_t> weight;
    if (a.contains("weight") && a["weight"].is_number_unsigned())
      weight = a["weight"].get<std::uint32_t>();
    s.admin.set(a.value("service", ""), *backend, *st, weight);
  }
  // Before the checker starts: it takes each backend's state from the board, so a backend down
  // there stays down until it rises again.
  for (const json& h : state.value("health", json::array())) {
    auto backend = net::Endpoint::parse(h.value("backend", ""));
    if (!backend) continue;
    std::string service = h.value("service", "");
    s.health.state(service, *backend);
    s.health.set_up(service, *backend, h.value("up", true));
    if (h.value("passed", false)) s.health.set_passed(service, *backend);
  }
  std::vector<net::IpAddress> vips;
  for (const json& v : state.value("announced", json::array())) {
    if (auto ip = net::IpAddress::parse(v.get<std::string>())) vips.push_back(*ip);
  }
  s.carried_vips = std::move(vips);
  const json resets = state.value("flows_reset_ms", json::object());
  for (const auto& [vip, ms] : resets.items()) {
    s.flows_reset_ms[vip] = ms.get<std::uint32_t>();
  }
}

xdp::HandedOverXdp take_xdp(const json& x, std::vector<UniqueFd>& fds) {
  xdp::HandedOverXdp out;
  const json maps = x.value("maps", json::object());
  for (const auto& [name, index] : maps.items()) {
    out.maps[name] = take_fd(fds, index);
  }
  for (const json& l : x.value("links", json::array())) {
    out.links.push_back(
        {l.value("ifname", ""), l.value("ifindex", 0),
         l.value("mode", "native") == "native" ? xdp::AttachMode::native : xdp::AttachMode::generic,
         static_cast<config::XdpMode>(l.value("requested", 0)), take_fd(fds, l["fd"])});
  }
  out.service_ids = x.value("service_ids", std::map<std::string, std::uint32_t>{});
  return out;
}

std::vector<tcp::HandedOverListener> take_listeners(const json& list, std::vector<UniqueFd>& fds) {
  std::vector<tcp::HandedOverListener> out;
  for (const json& l : list) {
    auto configured = net::Endpoint::parse(l.value("configured", ""));
    if (!configured) continue;
    tcp::HandedOverListener h{l.value("service", ""), l.value("kind", ""), *configured, {}};
    for (const json& index : l.value("fds", json::array())) h.fds.push_back(take_fd(fds, index));
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace

void report_takeover_failure(const std::string& socket_path, const std::string& why) noexcept {
  try {
    handover::Channel channel(connect_to(socket_path));
    handover::Message offer = channel.receive(kOfferTimeout);  // its fds close with it
    channel.send({{"error", why}});
  } catch (const std::exception&) {
    // The running ferryd sees this process exit instead.
  }
}

void Daemon::State::take_over(const std::string& socket_path) {
  auto started = std::chrono::steady_clock::now();
  handover::Channel channel(connect_to(socket_path));
  handover::Message offer;
  try {
    offer = channel.receive(kOfferTimeout);
  } catch (const handover::ChannelError& e) {
    throw std::runtime_error(fmt::format(
        "--takeover: the running ferryd at {} did not hand over: {} (a handover needs root or "
        "ferryd's own user)",
        socket_path, e.what()));
  }
  const int from_pid = offer.head.value("from_pid", 0);
  log::notice("takeover: ferryd {} (pid {}) offers {} descriptors",
              offer.head.value("version", "?"), from_pid, offer.fds.size());
  try {
    std::vector<UniqueFd>& fds = offer.fds;
    const json& head = offer.head;
    control =
        std::make_unique<control::ControlServer>(io, config->control, commands, policy, registry);
    control->inherit(take_fd(fds, head["control"]["unix"]), take_fd(fds, head["control"]["tcp"]));
    if (config->metrics.listen) {
      metrics_http = make_metrics_http();
      metrics_http->inherit(take_fd(fds, head["metrics"]));
    }
    admin.configure(config->services);
    take_state(*this, head.value("state", json::object()));
    xdp = std::make_unique<xdp::XdpPlane>(registry);
    if (head["xdp"].is_object()) xdp->take_over(take_xdp(head["xdp"], fds));
    if (head["fastpath"].is_object()) {
      handed_fastpath = fastpath::handed_over_from(head["fastpath"], fds);
    }
    apply_data_plane(*config);
    if (handed_fastpath) {
      // This file has no fast path: the running one's sockets just close with this process's
      // copies.
      handed_fastpath.reset();
    }
    std::vector<tcp::HandedOverListener> listeners = take_listeners(head["tcp"], fds);

    channel.send({{"type", "ready"}});
    handover::Message paused = channel.receive(kPausedTimeout);
    const auto paused_at_ns = paused.head.value("paused_at_ns", std::uint64_t{0});
    std::vector<fastpath::WorkerCarry> carries = fastpath::unpack(paused.body);
    // Carries come only for a handed-over plane; without them (the running ferryd had no fast
    // path) apply_data_plane() bound one afresh, which serves already.
    const bool adopted = fastpath && !carries.empty();
    if (adopted) fastpath->start_handed_over(carries);
    const std::uint64_t running_ns = handover::shared_clock_ns();
    const double pause_us =
        paused_at_ns ? static_cast<double>(running_ns - paused_at_ns) / 1000.0 : 0;
    if (adopted) fastpath->serve_handed_over();

    tcp = make_tcp_plane();
    tcp->inherit_listeners(std::move(listeners));
    tcp->start(admin::effective_config(*config, admin));
    control->start();
    if (metrics_http) metrics_http->start();
    announcing = true;
    boost::asio::post(io, [this] { refresh_announcements(); });

    const double took_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    std::size_t flows = fastpath ? fastpath->carried_flows() : 0;
    handover = {{"from_pid", from_pid},
                {"from_version", head.value("version", "")},
                {"frames_in_flight", fastpath ? fastpath->frames_in_rings() : 0},
                {"pause_us", pause_us},
                {"took_ms", took_ms},
                {"at", iso8601_utc(std::chrono::system_clock::now())},
                {"flows_carried", flows}};
    handover_pause_seconds = pause_us / 1e6;
    try {
      channel.send({{"type", "serving"}, {"pause_us", pause_us}});
    } catch (const handover::ChannelError& e) {
      // Everything runs here already; the predecessor is gone (under systemd, whose main
      // process it still was, the unit restarts).
      log::warning("takeover: pid {} is gone ({}); serving on", from_pid, e.what());
    }
    log::notice(
        "takeover: serving in place of pid {} after {:.1f} ms; fast path paused {:.0f} us, "
        "{} flows carried",
        from_pid, took_ms, pause_us, flows);
  } catch (const std::exception& e) {
    try {
      channel.send({{"error", e.what()}});
    } catch (const std::exception&) {
      // The running ferryd notices the closed connection instead.
    }
    // Leave what the running ferryd serves as it is: its XSKMAP entries, its routes, its socket
    // file.
    if (fastpath) fastpath->handed_over();
    if (announcer) announcer->release();
    if (control) control->stop_accepting();
    throw;
  }
  try {
    channel.receive(kDoneTimeout);
  } catch (const std::exception& e) {
    log::warning("takeover: pid {} did not confirm the handover ({}); serving anyway", from_pid,
                 e.what());
  }
}

}  // namespace ferry::lifecycle
