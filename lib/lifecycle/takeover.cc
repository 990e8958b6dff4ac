// The new ferryd's side of a handover (ferryd --takeover SOCKET): ask the running ferryd for its
// offer over its control socket, bring every plane up on its part without touching what the
// running one serves, have it pause its fast-path workers, and serve: our workers on the same
// rings first, then the TCP services on the handed-over listeners. A failure before that is told to
// the running ferryd, which serves on (docs/operations.md).
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

// The offer, or why none came.
handover::Message receive_offer(handover::Channel& channel, const std::string& socket_path) {
  try {
    return channel.receive(kOfferTimeout);
  } catch (const handover::ChannelError& e) {
    throw std::runtime_error(fmt::format(
        "--takeover: the running ferryd at {} did not hand over: {} (a handover needs root or "
        "ferryd's own user)",
        socket_path, e.what()));
  }
}

// Once bring_up() is past the planes' start: tells the running ferryd this one is ready, and
// returns what its paused planes carried.
handover::Offer await_pause(handover::Channel& channel) {
  channel.send({{"type", "ready"}});
  return handover::Offer::decode(channel.receive(kPausedTimeout), "paused");
}

// The new ferryd serves: how it went, for status and the log.
json takeover_report(const Daemon::State& s, const handover::Offer& offer,
                     std::chrono::steady_clock::time_point started) {
  const fastpath::FastpathPlane* fastpath = s.fastpath_plane.plane();
  return {{"from_pid", offer.from_pid},
          {"from_version", offer.version},
          {"frames_in_flight", fastpath ? fastpath->frames_in_rings() : 0},
          {"pause_us", s.fastpath_plane.pause_us()},
          {"took_ms",
           std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
               .count()},
          {"at", iso8601_utc(std::chrono::system_clock::now())},
          {"flows_carried", fastpath ? fastpath->carried_flows() : 0}};
}

// The predecessor may already be gone; everything runs here either way.
void tell_serving(handover::Channel& channel, int from_pid, double pause_us) {
  try {
    channel.send({{"type", "serving"}, {"pause_us", pause_us}});
  } catch (const handover::ChannelError& e) {
    // Under systemd, whose main process it still was, the unit restarts.
    log::warning("takeover: pid {} is gone ({}); serving on", from_pid, e.what());
  }
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
  handover::Message message = receive_offer(channel, socket_path);
  const int from_pid = message.head.value("from_pid", 0);
  log::notice("takeover: ferryd {} (pid {}) offers {} descriptors",
              message.head.value("version", "?"), from_pid, message.fds.size());
  try {
    handover::Offer offer = handover::Offer::decode(std::move(message), "offer");
    bring_up(&offer, [&channel] { return await_pause(channel); });
    handover = takeover_report(*this, offer, started);
    const double pause_us = handover["pause_us"].get<double>();
    handover_pause_seconds = pause_us / 1e6;
    tell_serving(channel, from_pid, pause_us);
    log::notice(
        "takeover: serving in place of pid {} after {:.1f} ms; fast path paused {:.0f} us, "
        "{} flows carried",
        from_pid, handover["took_ms"].get<double>(), pause_us,
        handover["flows_carried"].get<std::size_t>());
  } catch (const std::exception& e) {
    try {
      channel.send({{"error", e.what()}});
    } catch (const std::exception&) {
      // The running ferryd notices the closed connection instead.
    }
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
