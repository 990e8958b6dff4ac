// libFuzzer target for the whole control server: bytes from one client go through a real,
// started ControlServer (framing, the TCP auth gate, the handover taker, dispatch, counters) and
// the daemon's own command table (lib/lifecycle/control_commands.cc) over a fake daemon.
// Input: byte 0 picks the peer (% 4: root, a uid without admin access, a TCP client the harness
// authenticates, a TCP client whose first line is its own auth attempt); byte 1 how the fake's
// effects answer (bit 0: reload rejected, bit 1: steering fails once, bit 2: steering always
// fails; bits 4-5: the upgrade is 1 busy, 2 failed, else started, so '0'-'7' start, 'P' is busy
// and '`' failed); the rest is what the client sends before it half-closes.
// Checked: every line gets one well-formed response with a documented error code (never
// "internal"), the connection always ends, a peer without access sets off no admin effect, and
// only root's first well-formed handover request hands the connection to the taker.
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/log.hh"
#include "lib/control/protocol.hh"
#include "lib/control/server.hh"
#include "lib/lifecycle/control_commands.hh"
#include "lib/metrics/registry.hh"
#include "tests/fuzz/control_server/fake_daemon.hh"
#include "tests/fuzz/fuzz_check.hh"
#include "tests/fuzz/stream_exchange.hh"

namespace {

namespace asio = boost::asio;
using namespace ferry;
using control::Peer;
using control::Transport;
using nlohmann::json;

constexpr uid_t kDaemonUid = 995;  // the AccessPolicy's "daemon's uid": admin too
constexpr uid_t kOtherUid = 65534;
constexpr std::string_view kToken = "fuzz-token";

enum class PeerKind { root, other_uid, tcp_authenticated, tcp_raw };

// The error codes docs/control-protocol.md documents; "internal" is a finding.
const std::set<std::string> kDocumentedCodes = {
    "bad_request", "bad_args", "unknown_command", "permission_denied", "rejected",
    "not_found",   "busy",     "failed",          "too_large",         "unauthorized"};

// What `backend` finds: IPv4 and IPv6 backends, a weight, and a service without backends.
constexpr std::string_view kServices = R"([
  {"name": "web", "vip": "10.0.0.11", "port": 80, "protocols": ["tcp"],
   "backends": ["10.0.1.2:8080", {"address": "10.0.1.3:8080", "weight": 3}]},
  {"name": "dns6", "vip": "2001:db8::10", "port": 53, "protocols": ["tcp"],
   "backends": ["[2001:db8::2]:53"]},
  {"name": "echo", "vip": "127.0.0.1", "port": 7007, "protocols": ["tcp"], "mode": "echo"}
])";

std::string write_file(const std::filesystem::path& path, std::string_view text) {
  std::ofstream(path) << text;
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  return path.string();
}

// A started server on a socket file and a loopback TCP port of its own (neither is used: the
// fuzzer's clients are socketpairs handed to serve()), the daemon's table, the fake behind it.
struct World {
  World() {
    ::signal(SIGPIPE, SIG_IGN);
    log::set_threshold(log::Level::error);
    char pattern[] = "/tmp/ferry-fuzz-control-XXXXXX";
    dir = ::mkdtemp(pattern);
    std::string token_file = write_file(dir / "token", std::string(kToken) + "\n");
    json config = {{"control",
                    {{"socket", (dir / "ctl.sock").string()},
                     {"mode", "0600"},
                     {"group", nullptr},
                     {"tcp", {{"listen", "127.0.0.1:0"}, {"token_file", token_file}}}}},
                   {"metrics", {{"listen", nullptr}}},
                   {"services", json::parse(kServices)}};
    std::string good = write_file(dir / "ferryd.json", config.dump(2));
    std::string broken = write_file(dir / "broken.json", "{\"metrics\": {\"listne\": null}}");
    daemon = std::make_unique<fuzz::FakeDaemon>(good, broken, registry, policy);
    lifecycle::register_daemon_commands(table, *daemon);
    server = std::make_unique<control::ControlServer>(io, daemon->running_config().control, table,
                                                      policy, registry);
    server->start();
    server->set_socket_taker("handover", [this](UniqueFd fd, const Peer& peer) {
      daemon->take_handover_socket(std::move(fd), peer);
    });
  }
  ~World() {
    server->stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }

  std::filesystem::path dir;
  asio::io_context io;
  metrics::Registry registry;
  control::AccessPolicy policy{kDaemonUid};
  control::CommandTable table;
  std::unique_ptr<fuzz::FakeDaemon> daemon;
  std::unique_ptr<control::ControlServer> server;
};

World& world() {
  static World w;
  return w;
}

// Sends `bytes` over a socketpair the server serves as `peer`, half-closes, and returns all the
// server wrote until it closed. A server that never closes hangs here: libFuzzer's -timeout.
std::string converse(World& w, const Peer& peer, Transport transport, std::string_view bytes) {
  int pair[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0);
  w.server->serve(UniqueFd(pair[0]), peer, transport);
  asio::generic::stream_protocol::socket client(w.io, asio::generic::stream_protocol(AF_UNIX, 0),
                                                pair[1]);
  return fuzz::exchange(w.io, client, bytes);
}

// What the framing promises for `bytes` (docs/control-protocol.md, "Framing"): the lines that
// get an answer (non-blank, within the limit) before a line over the limit ends the connection,
// and whether one does.
struct Framing {
  std::vector<std::string_view> lines;
  bool too_large = false;
};

Framing frame(std::string_view bytes) {
  Framing f;
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    std::size_t newline = bytes.find('\n', pos);
    std::size_t end = newline == std::string_view::npos ? bytes.size() : newline;
    std::string_view line = bytes.substr(pos, end - pos);
    pos = newline == std::string_view::npos ? bytes.size() : newline + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > control::kMaxRequestBytes) {
      f.too_large = true;
      break;
    }
    if (line.find_first_not_of(" \t\r") != std::string_view::npos) f.lines.push_back(line);
  }
  return f;
}

// A request the protocol accepts, for "handover": the only kind of line the server may hand to
// the taker.
bool is_handover_request(std::string_view line) {
  try {
    json id;
    return control::decode_request(line, id).cmd == "handover";
  } catch (const control::CommandError&) {
    return false;
  }
}

struct Response {
  bool ok = false;
  std::string code;  // the error's
  bool authenticated = false;
};

// One response line: a JSON object {"id","ok","result"} or {"id","ok","error":{code,message}},
// in that key order, with an integer or null id.
Response check_response(std::string_view line) {
  FUZZ_CHECK(line.starts_with("{\"id\":"));
  json parsed = json::parse(line, nullptr, false);
  FUZZ_CHECK(parsed.is_object() && parsed.size() == 3);
  FUZZ_CHECK(parsed["id"].is_null() || parsed["id"].is_number_integer());
  FUZZ_CHECK(parsed["ok"].is_boolean());
  Response r;
  r.ok = parsed["ok"].get<bool>();
  if (r.ok) {
    FUZZ_CHECK(parsed.contains("result"));
    r.authenticated = parsed["result"].is_object() && parsed["result"].size() == 1 &&
                      parsed["result"].value("authenticated", false);
    return r;
  }
  const json& error = parsed["error"];
  FUZZ_CHECK(error.is_object() && error.size() == 2);
  FUZZ_CHECK(error["code"].is_string() && error["message"].is_string());
  FUZZ_CHECK(!error["message"].get_ref<const std::string&>().empty());
  r.code = error["code"].get<std::string>();
  FUZZ_CHECK(kDocumentedCodes.count(r.code) == 1);
  return r;
}

std::vector<Response> check_responses(std::string_view received) {
  std::vector<Response> out;
  FUZZ_CHECK(received.empty() || received.back() == '\n');  // nothing cut mid-line
  while (!received.empty()) {
    std::size_t newline = received.find('\n');
    out.push_back(check_response(received.substr(0, newline)));
    received.remove_prefix(newline + 1);
  }
  return out;
}

// Lines the server dispatched so far, by its own count (ferry_control_requests_total): a line
// whose response was still queued when the handover took the connection is counted too.
double total_of(const metrics::Registry& registry, std::string_view name) {
  double sum = 0;
  for (const metrics::Family& family : registry.snapshot()) {
    if (family.name != name) continue;
    for (const metrics::Sample& sample : family.samples) sum += sample.value;
  }
  return sum;
}

double dispatched_lines(const metrics::Registry& registry) {
  return total_of(registry, "ferry_control_requests_total");
}

// Connections refused at the door (a budget, or a TCP source the failure limiter turned away)
// and failed authentications.
double refusals(const metrics::Registry& registry) {
  return total_of(registry, "ferry_control_rejected_connections_total");
}

fuzz::FakeBehaviour behaviour_of(std::uint8_t bits) {
  fuzz::FakeBehaviour b;
  b.reload_rejected = bits & 1;
  b.steering_fails = bits & 2;
  b.steering_broken = bits & 4;
  static const char* const kUpgrade[] = {"", "busy", "failed", ""};
  b.upgrade_error = kUpgrade[(bits >> 4) & 3];
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  World& w = world();
  const auto kind = static_cast<PeerKind>(size > 0 ? data[0] % 4 : 0);
  w.daemon->reset(behaviour_of(size > 1 ? data[1] : 0));
  std::string_view payload(reinterpret_cast<const char*>(data), size);
  payload.remove_prefix(std::min<std::size_t>(size, 2));

  Peer peer;
  peer.pid = ::getpid();
  peer.uid = kind == PeerKind::other_uid ? kOtherUid : 0;
  const bool tcp = kind == PeerKind::tcp_authenticated || kind == PeerKind::tcp_raw;
  std::string sent;
  if (kind == PeerKind::tcp_authenticated) sent = "{\"auth\":\"" + std::string(kToken) + "\"}\n";
  sent += payload;

  const double dispatched_before = dispatched_lines(w.registry);
  const double refusals_before = refusals(w.registry);
  std::vector<Response> responses = check_responses(
      converse(w, tcp ? Peer{} : peer, tcp ? Transport::tcp : Transport::unix_socket, sent));
  FUZZ_CHECK(w.server->open_connections() == 0);
  if (tcp && responses.empty() && refusals(w.registry) > refusals_before) {
    // Every TCP peer here has one address, which the raw peers' wrong tokens get turned away
    // (5 failures in 10 s): refused at the door, counted, nothing of it reaches a command.
    FUZZ_CHECK(dispatched_lines(w.registry) == dispatched_before);
    const fuzz::FakeCalls& calls = w.daemon->calls();
    FUZZ_CHECK(calls.reloads == 0 && calls.upgrades == 0 && calls.steerings == 0 &&
               calls.handovers == 0);
    return 0;
  }

  const fuzz::FakeCalls& calls = w.daemon->calls();
  const bool admin = kind != PeerKind::other_uid;
  FUZZ_CHECK(!calls.handover_to_non_admin);
  if (!admin) FUZZ_CHECK(calls.reloads == 0 && calls.upgrades == 0 && calls.steerings == 0);
  const Framing framing = frame(sent);
  const std::size_t answered = framing.lines.size();
  const auto dispatched =
      static_cast<std::size_t>(dispatched_lines(w.registry) - dispatched_before);
  // Root's first well-formed handover request, and nothing before it, hands the connection to
  // the taker (every line before it dispatched, by the server's count); nobody else's does.
  std::size_t first_handover = answered;
  if (kind == PeerKind::root) {
    for (std::size_t i = 0; i < answered && first_handover == answered; ++i) {
      if (is_handover_request(framing.lines[i])) first_handover = i;
    }
  }
  FUZZ_CHECK(calls.handovers == (first_handover < answered ? 1 : 0));
  if (calls.handovers == 1) FUZZ_CHECK(dispatched == first_handover);
  bool unauthorized = false;
  for (std::size_t i = 0; i < responses.size(); ++i) {
    const Response& r = responses[i];
    const bool last = i + 1 == responses.size();
    if (r.code == "permission_denied") FUZZ_CHECK(!admin);
    if (r.code == "too_large") FUZZ_CHECK(last && framing.too_large);
    if (r.code == "unauthorized") {
      FUZZ_CHECK(kind == PeerKind::tcp_raw && i == 0 && last);
      unauthorized = true;
    }
    if (r.authenticated && i == 0) FUZZ_CHECK(tcp);
  }
  if (tcp && answered > 0) {
    // The first line is the auth attempt: the harness's is right; a raw client's is either.
    FUZZ_CHECK(!responses.empty());
    FUZZ_CHECK(responses[0].authenticated || responses[0].code == "unauthorized");
    if (kind == PeerKind::tcp_authenticated) FUZZ_CHECK(responses[0].authenticated);
  }
  // Every line answered, in one response each, unless the handover took the connection.
  if (calls.handovers == 0 && !unauthorized) {
    FUZZ_CHECK(responses.size() == answered + (framing.too_large ? 1 : 0));
    FUZZ_CHECK(dispatched == answered - (tcp && answered > 0 ? 1 : 0));
  } else {
    FUZZ_CHECK(responses.size() <= answered);
  }
  return 0;
}
