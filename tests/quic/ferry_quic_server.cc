// ferry_quic_server: a small HTTP/3 server on Debian's ngtcp2 (GnuTLS) and nghttp3 for ferry's
// QUIC tests. It issues QUIC-LB connection IDs encoded with ferry's own CidCodec, as a real server
// behind a QUIC-LB load balancer does, finds connections by DCID (so clients may move), answers
// GET /name with its name and GET /bytes/N with N bytes, and logs one JSON line per event.
//
//   ferry_quic_server --name NAME --listen ADDR:PORT --cert FILE --key FILE
//       [--quic-lb config_id=C,server_id=HEX,nonce_bytes=N[,key=32HEX]]
//       [--reset-secret HEX] [--body-bytes-per-s N]
//
// Single-threaded: one UDP socket, one ppoll loop, SIGTERM/SIGINT by signalfd.
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "lib/common/net.hh"
#include "lib/common/unique_fd.hh"
#include "tests/quic/cid_issuer.hh"
#include "tests/quic/cid_table.hh"
#include "tests/quic/event_log.hh"
#include "tests/quic/hex.hh"
#include "tests/quic/quic_connection.hh"
#include "tests/quic/quic_lb_option.hh"
#include "tests/quic/tls_server.hh"
#include "tests/quic/udp_socket.hh"

namespace ferry::quic_test {
namespace {

constexpr const char* kUsage =
    "usage: ferry_quic_server --name NAME --listen ADDR:PORT --cert FILE --key FILE\n"
    "         [--quic-lb config_id=C,server_id=HEX,nonce_bytes=N[,key=32HEX]]\n"
    "         [--reset-secret HEX] [--body-bytes-per-s N]\n"
    "  --listen          one address (IPv6 as [addr]:port); port 0 lets the kernel pick\n"
    "  --quic-lb         issue QUIC-LB connection IDs (else 18 random octets)\n"
    "  --reset-secret    key of the stateless reset tokens (default random); servers behind\n"
    "                    one balancer share it so a reset from any of them is believed\n"
    "  --body-bytes-per-s  pace /bytes/N bodies at this rate (default 0: unpaced)\n";

struct Options {
  std::string name, cert, key;
  net::Endpoint listen;
  std::optional<QuicLbOption> quic_lb;
  std::vector<std::uint8_t> reset_secret;
  std::uint64_t body_bytes_per_s = 0;
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Options parse_options(int argc, char** argv) {
  Options o;
  bool have_listen = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") throw UsageError("");
    if (i + 1 >= argc) throw UsageError(std::string(flag) + " needs a value");
    std::string_view value = argv[++i];
    if (flag == "--name") {
      o.name = value;
    } else if (flag == "--listen") {
      auto endpoint = net::Endpoint::parse(value);
      if (!endpoint) throw UsageError("--listen " + std::string(value) + " is not ADDR:PORT");
      o.listen = *endpoint;
      have_listen = true;
    } else if (flag == "--cert") {
      o.cert = value;
    } else if (flag == "--key") {
      o.key = value;
    } else if (flag == "--quic-lb") {
      o.quic_lb = parse_quic_lb_option(value);
    } else if (flag == "--reset-secret") {
      auto bytes = from_hex(value);
      if (!bytes || bytes->size() < 16) {
        throw UsageError("--reset-secret needs at least 32 hex digits");
      }
      o.reset_secret = std::move(*bytes);
    } else if (flag == "--body-bytes-per-s") {
      auto [end, ec] =
          std::from_chars(value.data(), value.data() + value.size(), o.body_bytes_per_s);
      if (ec != std::errc() || end != value.data() + value.size()) {
        throw UsageError("--body-bytes-per-s " + std::string(value) + " is not a number");
      }
    } else {
      throw UsageError("unknown option " + std::string(flag));
    }
  }
  if (o.name.empty() || !have_listen || o.cert.empty() || o.key.empty()) {
    throw UsageError("--name, --listen, --cert and --key are required");
  }
  if (o.reset_secret.empty()) {
    o.reset_secret.resize(32);
    fill_random(o.reset_secret);
  }
  return o;
}

// SIGTERM and SIGINT, blocked and read from a signalfd (so the loop sees them between packets).
UniqueFd termination_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  UniqueFd fd(signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!fd) throw std::system_error(errno, std::generic_category(), "signalfd");
  return fd;
}

class Server {
 public:
  Server(const Options& options, const TlsCredentials& tls, const CidIssuer& issuer,
         UdpSocket& socket)
      : options_(options),
        issuer_(issuer),
        socket_(socket),
        context_{ResponderConfig{options.name, options.body_bytes_per_s},
                 issuer,
                 options.reset_secret,
                 tls,
                 socket,
                 cids_} {}

  void run(int signal_fd);

 private:
  void receive(ngtcp2_tstamp now);
  void on_datagram(std::span<const std::uint8_t> data, const SocketAddress& from,
                   ngtcp2_tstamp now);
  void send_stateless_reset(std::span<const std::uint8_t> dcid, std::size_t trigger_bytes,
                            const SocketAddress& to);

  const Options& options_;
  const CidIssuer& issuer_;
  UdpSocket& socket_;
  CidTable cids_;
  ServerContext context_;
  std::vector<std::unique_ptr<QuicConnection>> connections_;
};

void Server::run(int signal_fd) {
  for (;;) {
    ngtcp2_tstamp next = std::numeric_limits<ngtcp2_tstamp>::max();
    bool blocked = false;
    for (const auto& c : connections_) {
      next = std::min(next, c->next_timer());
      blocked = blocked || c->send_blocked();
    }
    ngtcp2_tstamp now = monotonic_ns();
    timespec timeout{};
    if (next != std::numeric_limits<ngtcp2_tstamp>::max() && next > now) {
      timeout.tv_sec = static_cast<time_t>((next - now) / NGTCP2_SECONDS);
      timeout.tv_nsec = static_cast<long>((next - now) % NGTCP2_SECONDS);
    }
    bool idle = next == std::numeric_limits<ngtcp2_tstamp>::max();
    std::array<pollfd, 2> fds{
        {{socket_.fd(), static_cast<short>(POLLIN | (blocked ? POLLOUT : 0)), 0},
         {signal_fd, POLLIN, 0}}};
    if (::ppoll(fds.data(), fds.size(), idle ? nullptr : &timeout, nullptr) < 0 && errno != EINTR) {
      throw std::system_error(errno, std::generic_category(), "ppoll");
    }
    now = monotonic_ns();
    if (fds[1].revents & POLLIN) {
      signalfd_siginfo info;
      ssize_t n = ::read(signal_fd, &info, sizeof(info));
      int signo = n == sizeof(info) ? static_cast<int>(info.ssi_signo) : SIGTERM;
      for (auto& c : connections_) c->shut_down(now);
      connections_.clear();
      log_event({{"event", "stopped"}, {"signal", strsignal(signo)}});
      return;
    }
    if (fds[0].revents & POLLIN) receive(now);
    now = monotonic_ns();
    for (auto& c : connections_) {
      if (c->next_timer() <= now) c->on_timer(now);
      c->write(now);
    }
    std::erase_if(connections_, [](const auto& c) { return c->finished(); });
  }
}

void Server::receive(ngtcp2_tstamp now) {
  static std::array<std::uint8_t, 65536> buffer;
  SocketAddress from;
  // A batch, then timers and writes get their turn.
  for (int i = 0; i < 64; ++i) {
    auto n = socket_.receive(buffer, from);
    if (!n) return;
    on_datagram({buffer.data(), *n}, from, now);
  }
}

void Server::on_datagram(std::span<const std::uint8_t> data, const SocketAddress& from,
                         ngtcp2_tstamp now) {
  if (data.empty()) return;
  ngtcp2_version_cid vc;
  // Short headers carry no DCID length: it is the length of every CID this server issues.
  // NGTCP2_ERR_VERSION_NEGOTIATION (a version ngtcp2 does not speak) is dropped too: the clients
  // of these tests speak QUIC v1.
  if (ngtcp2_pkt_decode_version_cid(&vc, data.data(), data.size(), issuer_.cid_bytes()) != 0) {
    return;
  }
  std::span<const std::uint8_t> dcid(vc.dcid, vc.dcidlen);
  if (QuicConnection* connection = cids_.find(dcid)) {
    connection->on_datagram(from, data, now);
    return;
  }
  bool long_header = data[0] & 0x80;
  if (!long_header) {
    send_stateless_reset(dcid, data.size(), from);
    return;
  }
  ngtcp2_pkt_hd hd;
  // Anything but an acceptable first Initial for an unknown DCID (a Handshake or 0-RTT packet of
  // a connection this server does not have) is dropped: a stateless reset must look like a short
  // header packet, and it is the 1-RTT packets of a moved connection that matter.
  if (ngtcp2_accept(&hd, data.data(), data.size()) != 0 || hd.type != NGTCP2_PKT_INITIAL) return;
  try {
    auto connection = std::make_unique<QuicConnection>(context_, hd, from, now);
    connection->on_datagram(from, data, now);
    connections_.push_back(std::move(connection));
  } catch (const std::exception& e) {
    log_event({{"event", "error"}, {"what", e.what()}, {"remote", from.to_string()}});
  }
}

// A short header packet for a connection this server does not have: what a backend sees when a
// balancer sends a moved connection to the wrong server. Answered with a stateless reset (RFC 9000
// 10.3) whose token is derived from the DCID with the reset secret: a client believes it when the
// server that issued the CID derives its tokens with the same secret (--reset-secret shared by
// the servers behind one balancer), and ignores it otherwise. Each reset is shorter than the
// packet that triggered it, so two endpoints can never reset each other in a loop.
void Server::send_stateless_reset(std::span<const std::uint8_t> dcid, std::size_t trigger_bytes,
                                  const SocketAddress& to) {
  constexpr std::size_t kMinResetBytes =
      NGTCP2_MIN_STATELESS_RESET_RANDLEN + NGTCP2_STATELESS_RESET_TOKENLEN + 1;
  constexpr std::size_t kMaxResetBytes = 43;  // 1 + 20-octet CID + 22, like a small 1-RTT packet
  if (trigger_bytes <= kMinResetBytes) return;
  std::size_t reset_bytes = std::min(trigger_bytes - 1, kMaxResetBytes);
  ngtcp2_cid cid;
  ngtcp2_cid_init(&cid, dcid.data(), dcid.size());
  std::array<std::uint8_t, NGTCP2_STATELESS_RESET_TOKENLEN> token;
  if (ngtcp2_crypto_generate_stateless_reset_token(token.data(), options_.reset_secret.data(),
                                                   options_.reset_secret.size(), &cid) != 0) {
    return;
  }
  std::array<std::uint8_t, kMaxResetBytes> random;
  std::size_t random_bytes = reset_bytes - NGTCP2_STATELESS_RESET_TOKENLEN;
  fill_random({random.data(), random_bytes});
  std::array<std::uint8_t, kMaxResetBytes> packet;
  ngtcp2_ssize n = ngtcp2_pkt_write_stateless_reset(packet.data(), packet.size(), token.data(),
                                                    random.data(), random_bytes);
  if (n <= 0) return;
  // Logged first, so that a test which received the reset finds it in the log.
  log_event({{"event", "stateless_reset"}, {"dcid", to_hex(dcid)}, {"remote", to.to_string()}});
  socket_.send_to(to.get(), to.len, {packet.data(), static_cast<std::size_t>(n)});
}

int run(int argc, char** argv) {
  Options options;
  try {
    options = parse_options(argc, argv);
  } catch (const UsageError& e) {
    if (*e.what()) std::fprintf(stderr, "ferry_quic_server: %s\n", e.what());
    std::fputs(kUsage, *e.what() ? stderr : stdout);
    return *e.what() ? 64 : 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "ferry_quic_server: %s\n", e.what());
    return 64;
  }
  UniqueFd signals = termination_signals();
  TlsCredentials tls(options.cert, options.key);
  CidIssuer issuer(options.quic_lb);
  UdpSocket socket(options.listen);
  nlohmann::json listening{{"event", "listening"},
                           {"name", options.name},
                           {"listen", socket.local().to_string()},
                           {"cid_bytes", issuer.cid_bytes()}};
  if (options.quic_lb) {
    // Never the key: logs are not where secrets go.
    listening["quic_lb"] = {{"config_id", options.quic_lb->config.config_id},
                            {"server_id", to_hex(options.quic_lb->server_id)},
                            {"nonce_bytes", options.quic_lb->config.nonce_bytes},
                            {"algorithm", quic::to_string(options.quic_lb->config.algorithm())}};
  }
  log_event(listening);
  Server server(options, tls, issuer, socket);
  server.run(signals.get());
  return 0;
}

}  // namespace
}  // namespace ferry::quic_test

int main(int argc, char** argv) {
  try {
    return ferry::quic_test::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry_quic_server: %s\n", e.what());
    return 1;
  }
}
