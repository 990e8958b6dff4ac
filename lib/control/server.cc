// The control server: listeners, the connection set and its limits, and the request counters.
// Everything runs on the one io_context it is given (the control thread).
#include "lib/control/server.hh"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <variant>

#include "lib/common/log.hh"
#include "lib/common/log_limiter.hh"
#include "lib/common/unique_fd.hh"
#include "lib/control/connection.hh"
#include "lib/control/control_counters.hh"
#include "lib/control/peer_budget.hh"
#include "lib/control/protocol.hh"
#include "lib/control/socket_file.hh"
#include "lib/control/tcp_auth.hh"

namespace ferry::control {
namespace {

namespace asio = boost::asio;
using Acceptor = asio::basic_socket_acceptor<asio::generic::stream_protocol>;

// Accept errors such as EMFILE persist until something is closed; retrying at once would spin.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

bool is_loopback(const net::IpAddress& address) {
  if (address.is_v4()) return address.bytes[0] == 127;
  for (int i = 0; i < 15; ++i) {
    if (address.bytes[i] != 0) return false;
  }
  return address.bytes[15] == 1;
}

// A Unix peer as SO_PEERCRED tells it; unknown credentials get no more than read access.
Peer unix_peer(int fd) {
  Peer peer;
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) == 0) {
    peer.pid = cred.pid;
    peer.uid = cred.uid;
    peer.gid = cred.gid;
  } else {
    peer.uid = static_cast<uid_t>(-1);
    peer.gid = static_cast<gid_t>(-1);
  }
  return peer;
}

// How logs name a client; for TCP also the key of the authentication failure limit, by address
// alone: a client retrying from new ports is the same client.
std::string unix_source(const Peer& peer) {
  return fmt::format("unix pid {} uid {}", peer.pid, static_cast<long>(peer.uid));
}

std::string tcp_address(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  std::optional<net::Endpoint> remote;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    remote = net::Endpoint::from_sockaddr(reinterpret_cast<const sockaddr*>(&address), length);
  }
  return remote ? remote->address.to_string() : std::string("unknown");
}

PeerBudgetLimits budget_limits(const config::ControlConfig& config) {
  return PeerBudgetLimits{
      .max_connections = config.max_connections,
      .admin_reserved = config.admin_reserved_connections,
      .per_uid = config.max_connections_per_uid,
      .unauthenticated = config.tcp.listen ? config.tcp.max_unauthenticated : 0,
      .unauthenticated_per_source = config.tcp.max_unauthenticated_per_source,
  };
}

class ServerCore final : public ConnectionHost, public std::enable_shared_from_this<ServerCore> {
 public:
  ServerCore(asio::io_context& io, const config::ControlConfig& config,
             const CommandTable& commands, const AccessPolicy& policy, metrics::Registry& registry)
      : config_(config),
        commands_(commands),
        policy_(policy),
        registry_(registry),
        unix_acceptor_(io),
        tcp_acceptor_(io),
        unix_retry_timer_(io),
        tcp_retry_timer_(io),
        budget_(budget_limits(config)) {
    limits.auth_timeout = std::chrono::milliseconds(config.tcp.auth_timeout_ms);
  }

  ~ServerCore() { stop(); }

  void start();
  void stop();

  std::size_t open_connections() const { return open_count_.load(std::memory_order_relaxed); }
  std::optional<net::Endpoint> tcp_endpoint() const { return tcp_endpoint_; }
  ConnectionLimits limits;

  // ConnectionHost
  std::string handle_request(std::string_view line, const Peer& peer) override;
  bool authenticate(std::string_view line, const Connection& connection) override;
  void auth_timed_out(const Connection& connection) override;
  void request_too_large(const Connection& connection) override;
  void slow_reader(const Connection& connection) override;
  void connection_closed(Connection& connection) override;
  bool take_socket(std::string_view line, const Peer& peer, int fd) override;

  void stop_accepting();
  // A connection whose peer is known (and, over TCP, not turned away by the failure limiter):
  // admitted within its budget, counted and started; or refused.
  void serve(Connection::Socket socket, const Peer& peer, Transport transport);
  asio::any_io_executor executor() { return unix_acceptor_.get_executor(); }
  UniqueFd inherited_unix;
  UniqueFd inherited_tcp;
  std::string taker_command;
  std::function<void(UniqueFd, const Peer&)> taker;
  int unix_fd() { return unix_acceptor_.is_open() ? unix_acceptor_.native_handle() : -1; }
  int tcp_fd() { return tcp_acceptor_.is_open() ? tcp_acceptor_.native_handle() : -1; }

 private:
  void listen_tcp(const net::Endpoint& listen);
  // The Unix socket's listen backlog: no deeper than the connections that could be served
  // (control.max_connections; the kernel caps it at net.core.somaxconn). A connection waiting
  // there is seen by no budget until it is accepted, so root's connect waits behind every one a
  // flooder queued; beyond the backlog a blocking connect (ferryctl's) waits in the kernel.
  int unix_backlog() const { return static_cast<int>(config_.max_connections); }
  void close_acceptors();
  void accept_next(Transport transport);
  void on_accept(Transport transport, const boost::system::error_code& error,
                 Connection::Socket socket);
  // Counts, logs (rate-limited) and closes. `why()` is only formatted when the line is logged:
  // a flood is refused thousands of times a second.
  template <typename Why>
  void refuse(Connection::Socket& socket, metrics::Counter& counter, LogLimiter& limiter,
              const Why& why) {
    counter.add();
    std::uint64_t suppressed = 0;
    if (limiter.allow(suppressed))
      log::warning("control: {}{}", why(), suppressed_note(suppressed));
    boost::system::error_code ignored;
    socket.close(ignored);
  }
  PeerAdmission admit(const Peer& peer, Transport transport, const std::string& address);
  void update_open_count();

  config::ControlConfig config_;
  const CommandTable& commands_;
  const AccessPolicy& policy_;
  metrics::Registry& registry_;

  Acceptor unix_acceptor_;
  Acceptor tcp_acceptor_;
  asio::steady_timer unix_retry_timer_;
  asio::steady_timer tcp_retry_timer_;
  std::optional<SocketFileIdentity> socket_identity_;
  std::optional<net::Endpoint> tcp_endpoint_;
  std::string token_;
  AuthFailureLimiter auth_failures_;

  std::unique_ptr<ControlCounters> counters_;
  metrics::Registry::Handle metrics_handle_;  // after counters_: its collector reads them

  // Before connections_: their leases give their slots back to it.
  PeerBudget budget_;
  struct OpenConnection {
    std::shared_ptr<Connection> connection;
    PeerLease lease;
  };
  std::unordered_map<const Connection*, OpenConnection> connections_;
  std::atomic<std::size_t> open_count_{0};

  std::array<LogLimiter, std::size(kRefusals)> refusal_logs_;
  LogLimiter auth_log_;
  LogLimiter auth_timeout_log_;
  LogLimiter accept_error_log_;
  LogLimiter denied_log_;
  bool started_ = false;
  bool stopped_ = false;
  bool accepting_ = true;
};

void ServerCore::start() {
  if (started_ || stopped_) throw std::logic_error("ControlServer::start() called twice");
  started_ = true;
  try {
    // Everything that can be refused is checked before anything is created.
    if (config_.tcp.listen) {
      if (!config_.tcp.token_file) {
        throw std::runtime_error(fmt::format(
            "control.tcp.listen {} is set but control.tcp.token_file is not: TCP control needs a "
            "token",
            config_.tcp.listen->to_string()));
      }
      token_ = read_token_file(*config_.tcp.token_file);
    }
    counters_ = std::make_unique<ControlCounters>(commands_);

    BoundSocketFile bound;
    struct stat st {};
    if (inherited_unix && ::stat(config_.socket.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
      // The predecessor's socket and file: clients never see the path missing. Its backlog
      // is set again, in case the predecessor's was another.
      bound.fd = std::move(inherited_unix);
      ::listen(bound.fd.get(), unix_backlog());
      bound.identity = SocketFileIdentity{st.st_dev, st.st_ino};
    } else {
      inherited_unix.reset();
      bound = bind_socket_file(config_.socket, config_.mode, config_.group, unix_backlog());
    }
    socket_identity_ = bound.identity;
    boost::system::error_code error;
    unix_acceptor_.assign(asio::generic::stream_protocol(AF_UNIX, 0), bound.fd.get(), error);
    if (error) {
      throw std::runtime_error(fmt::format("control.socket {}: cannot watch the socket: {}",
                                           config_.socket, error.message()));
    }
    bound.fd.release();

    if (config_.tcp.listen) listen_tcp(*config_.tcp.listen);

    metrics_handle_ =
        registry_.add([counters = counters_.get()](metrics::SnapshotBuilder& builder) {
          counters->collect(builder);
        });

    accept_next(Transport::unix_socket);
    if (config_.tcp.listen) accept_next(Transport::tcp);
    log::info("control: listening on {} (mode {:04o}, group {})", config_.socket, config_.mode,
              config_.group ? *config_.group : std::string("unchanged"));
  } catch (...) {
    stop();
    throw;
  }
}

void ServerCore::listen_tcp(const net::Endpoint& listen) {
  auto fail = [&](std::string_view what, int err) {
    return std::runtime_error(
        fmt::format("control.tcp.listen {}: {}: {}", listen.to_string(), what, std::strerror(err)));
  };
  sockaddr_storage address{};
  socklen_t length = listen.to_sockaddr(address);
  UniqueFd fd = std::move(inherited_tcp);
  if (!fd) {
    fd.reset(::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP));
    if (!fd) throw fail("socket", errno);
    int one = 1;
    if (::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
      throw fail("SO_REUSEADDR", errno);
    }
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address), length) != 0) {
      throw fail("bind", errno);
    }
    if (::listen(fd.get(), SOMAXCONN) != 0) throw fail("listen", errno);
  }
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
    throw fail("getsockname", errno);
  }
  tcp_endpoint_ =
      net::Endpoint::from_sockaddr(reinterpret_cast<const sockaddr*>(&bound), bound_length);

  boost::system::error_code error;
  tcp_acceptor_.assign(asio::generic::stream_protocol(address.ss_family, IPPROTO_TCP), fd.get(),
                       error);
  if (error) {
    throw std::runtime_error(fmt::format("control.tcp.listen {}: cannot watch the socket: {}",
                                         listen.to_string(), error.message()));
  }
  fd.release();
  std::string where = tcp_endpoint_ ? tcp_endpoint_->to_string() : listen.to_string();
  if (is_loopback(listen.address)) {
    log::info("control: TCP control listening on {} (token authentication)", where);
  } else {
    log::warning(
        "control: TCP control listening on {}: the token and every command cross the "
        "network unencrypted; keep it on a trusted network or tunnel it",
        where);
  }
}

void ServerCore::close_acceptors() {
  accepting_ = false;
  boost::system::error_code ignored;
  unix_acceptor_.close(ignored);
  tcp_acceptor_.close(ignored);
  unix_retry_timer_.cancel();
  tcp_retry_timer_.cancel();
}

void ServerCore::stop() {
  if (stopped_) return;
  stopped_ = true;
  close_acceptors();

  // close() calls back into connection_closed(), which must not erase under this loop.
  auto open = std::move(connections_);
  connections_.clear();
  for (auto& [raw, entry] : open) entry.connection->close();
  update_open_count();

  if (socket_identity_) {
    remove_socket_file(config_.socket, *socket_identity_);
    socket_identity_.reset();
  }
  tcp_endpoint_.reset();
  metrics_handle_.reset();
}

void ServerCore::accept_next(Transport transport) {
  Acceptor& acceptor = transport == Transport::tcp ? tcp_acceptor_ : unix_acceptor_;
  acceptor.async_accept([weak = weak_from_this(), transport](const boost::system::error_code& error,
                                                             Connection::Socket socket) {
    auto self = weak.lock();
    if (!self || self->stopped_ || !self->accepting_) return;
    self->on_accept(transport, error, std::move(socket));
  });
}

void ServerCore::on_accept(Transport transport, const boost::system::error_code& error,
                           Connection::Socket socket) {
  if (error) {
    if (error == asio::error::operation_aborted) return;
    std::uint64_t suppressed = 0;
    if (accept_error_log_.allow(suppressed)) {
      log::warning("control: accept: {}; retrying{}", error.message(), suppressed_note(suppressed));
    }
    auto& timer = transport == Transport::tcp ? tcp_retry_timer_ : unix_retry_timer_;
    timer.expires_after(kAcceptRetryDelay);
    timer.async_wait([weak = weak_from_this(), transport](const boost::system::error_code& e) {
      auto self = weak.lock();
      if (!self || self->stopped_ || e) return;
      self->accept_next(transport);
    });
    return;
  }
  accept_next(transport);
  Peer peer = transport == Transport::unix_socket ? unix_peer(socket.native_handle()) : Peer{};
  serve(std::move(socket), peer, transport);
}

PeerAdmission ServerCore::admit(const Peer& peer, Transport transport, const std::string& address) {
  if (transport == Transport::tcp) return budget_.admit_unauthenticated(address);
  if (policy_.allows(peer, Access::admin)) return budget_.admit_admin();
  return budget_.admit_local(peer.uid);
}

void ServerCore::serve(Connection::Socket socket, const Peer& peer, Transport transport) {
  if (!counters_) throw std::logic_error("ControlServer::serve() before start()");
  std::string address;
  std::string source;  // a Unix peer's is formatted once it is admitted (or logged)
  if (transport == Transport::tcp) {
    address = tcp_address(socket.native_handle());
    source = "tcp " + address;
    if (auth_failures_.blocked(source, AuthFailureLimiter::Clock::now())) {
      refuse(socket, counters_->rejected_auth, auth_log_, [&] {
        return fmt::format(
            "{}: refusing a control connection after repeated authentication "
            "failures",
            source);
      });
      return;
    }
  }
  PeerAdmission admission = admit(peer, transport, address);
  if (auto* refusal = std::get_if<Refusal>(&admission)) {
    refuse(socket, counters_->rejected(*refusal), refusal_logs_[static_cast<std::size_t>(*refusal)],
           [&] { return budget_.explain(*refusal, source.empty() ? unix_source(peer) : source); });
    return;
  }
  if (source.empty()) source = unix_source(peer);
  counters_->connection(transport);
  auto connection =
      std::make_shared<Connection>(std::move(socket), peer, transport == Transport::tcp,
                                   std::move(source), limits, weak_from_this());
  connections_.emplace(connection.get(),
                       OpenConnection{connection, std::get<PeerLease>(std::move(admission))});
  update_open_count();
  connection->start();
}

std::string ServerCore::handle_request(std::string_view line, const Peer& peer) {
  DispatchOutcome outcome;
  std::string response = dispatch(commands_, policy_, peer, line, outcome);
  counters_->request(outcome.cmd, outcome.ok);
  if (outcome.error_code == "bad_request") {
    counters_->bad_request.add();
  } else if (outcome.error_code == "too_large") {
    counters_->too_large.add();
  } else if (outcome.error_code == "permission_denied") {
    std::uint64_t suppressed = 0;
    if (denied_log_.allow(suppressed)) {
      log::notice(
          "control: denied '{}' to uid {} (pid {}): admin commands need root or the "
          "daemon's uid{}",
          outcome.cmd, static_cast<long>(peer.uid), peer.pid, suppressed_note(suppressed));
    }
  }
  return response;
}

bool ServerCore::authenticate(std::string_view line, const Connection& connection) {
  const std::string& source = connection.source();
  std::optional<std::string> token = parse_auth_line(line);
  if (token && token_matches(token_, *token)) {
    log::info("control: {}: authenticated", source);
    // From the unauthenticated pool and its address's budget to an admin's slot.
    if (auto it = connections_.find(&connection); it != connections_.end()) {
      budget_.promote_to_admin(it->second.lease);
    }
    return true;
  }
  auth_failures_.record_failure(source, AuthFailureLimiter::Clock::now());
  counters_->rejected_auth.add();
  std::uint64_t suppressed = 0;
  if (auth_log_.allow(suppressed)) {
    log::warning("control: {}: TCP control authentication failed ({}){}", source,
                 token ? "wrong token" : "first line is not {\"auth\":\"<token>\"}",
                 suppressed_note(suppressed));
  }
  return false;
}

void ServerCore::auth_timed_out(const Connection& connection) {
  counters_->rejected_auth_timeout.add();
  std::uint64_t suppressed = 0;
  if (auth_timeout_log_.allow(suppressed)) {
    log::info("control: {}: no auth line within {} ms (control.tcp.auth_timeout_ms); closing{}",
              connection.source(), limits.auth_timeout.count(), suppressed_note(suppressed));
  }
}

void ServerCore::stop_accepting() {
  close_acceptors();
  socket_identity_.reset();  // the file is the successor's now
}

bool ServerCore::take_socket(std::string_view line, const Peer& peer, int fd) {
  if (!taker || peer.tcp || !policy_.allows(peer, Access::admin)) return false;
  // Only a request the protocol accepts, naming the taker's command, is taken: any id, args an
  // object or absent, no other key. Anything else (a "cmd" that is not a string, a bad id, args
  // that are not an object) is the command table's to answer, as it is for every peer.
  try {
    nlohmann::json id;
    if (decode_request(line, id).cmd != taker_command) return false;
  } catch (const CommandError&) {
    return false;
  }
  UniqueFd copy;
  try {
    copy = duplicate_fd(fd);
  } catch (const std::system_error&) {
    return false;  // answered as a command: the table's handover says what it is for
  }
  // The copy shares the file with the asio socket, which made it non-blocking.
  ::fcntl(copy.get(), F_SETFL, ::fcntl(copy.get(), F_GETFL) & ~O_NONBLOCK);
  log::info("control: uid {} pid {} asked for the handover", peer.uid, peer.pid);
  taker(std::move(copy), peer);
  return true;
}

void ServerCore::request_too_large(const Connection&) {
  counters_->too_large.add();
}

void ServerCore::slow_reader(const Connection&) {
  counters_->rejected_slow_reader.add();
}

void ServerCore::connection_closed(Connection& connection) {
  connections_.erase(&connection);
  update_open_count();
}

void ServerCore::update_open_count() {
  open_count_.store(connections_.size(), std::memory_order_relaxed);
  if (counters_) counters_->connections_open.set(static_cast<std::int64_t>(connections_.size()));
}

}  // namespace

struct ControlServer::Impl {
  std::shared_ptr<ServerCore> core;
};

ControlServer::ControlServer(boost::asio::io_context& io, const config::ControlConfig& config,
                             const CommandTable& commands, const AccessPolicy& policy,
                             metrics::Registry& registry)
    : impl_(std::make_unique<Impl>(
          Impl{std::make_shared<ServerCore>(io, config, commands, policy, registry)})) {}

ControlServer::~ControlServer() {
  stop();
}

void ControlServer::start() {
  impl_->core->start();
}

void ControlServer::stop() {
  impl_->core->stop();
}

void ControlServer::inherit(UniqueFd unix_socket, UniqueFd tcp_socket) {
  impl_->core->inherited_unix = std::move(unix_socket);
  impl_->core->inherited_tcp = std::move(tcp_socket);
}

int ControlServer::unix_fd() const {
  return impl_->core->unix_fd();
}

int ControlServer::tcp_fd() const {
  return impl_->core->tcp_fd();
}

void ControlServer::stop_accepting() {
  impl_->core->stop_accepting();
}

void ControlServer::serve(UniqueFd connected, const Peer& peer, Transport transport) {
  int family = AF_UNIX;
  socklen_t length = sizeof family;
  ::getsockopt(connected.get(), SOL_SOCKET, SO_DOMAIN, &family, &length);
  ServerCore& core = *impl_->core;
  Connection::Socket socket(core.executor(), asio::generic::stream_protocol(family, 0),
                            connected.get());
  connected.release();
  core.serve(std::move(socket), peer, transport);
}

void ControlServer::set_socket_taker(std::string command,
                                     std::function<void(UniqueFd, const Peer&)> taker) {
  impl_->core->taker_command = std::move(command);
  impl_->core->taker = std::move(taker);
}

std::size_t ControlServer::open_connections() const {
  return impl_->core->open_connections();
}

void ControlServer::set_idle_timeout(std::chrono::milliseconds timeout) {
  impl_->core->limits.idle_timeout = timeout;
}

std::optional<net::Endpoint> ControlServer::tcp_endpoint() const {
  return impl_->core->tcp_endpoint();
}

}  // namespace ferry::control
