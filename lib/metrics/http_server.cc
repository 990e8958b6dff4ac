// The Prometheus scrape endpoint: GET /metrics over HTTP/1.x on the control thread's io_context.
#include "lib/metrics/http_server.hh"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>

#include "lib/common/log.hh"
#include "lib/common/log_limiter.hh"
#include "lib/metrics/http_request.hh"
#include "lib/metrics/prometheus.hh"
#include "lib/metrics/source_budget.hh"

namespace ferry::metrics {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

constexpr std::string_view kIndexPage =
    "<!DOCTYPE html>\n<html><head><title>ferryd</title></head>\n"
    "<body><h1>ferryd</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";
// After the last response of a connection, how much of the client's leftover input is read and
// discarded so that closing does not reset the connection before the client has read the answer.
constexpr std::size_t kMaxDrainBytes = 64 * 1024;
constexpr std::chrono::milliseconds kAcceptRetryDelay{100};
// A client pipelining many requests gets its answers in batches of about this size, so that a
// few bytes of requests cannot make the server hold many snapshots' worth of answers at once.
constexpr std::size_t kMaxPendingAnswerBytes = 256 * 1024;

// Every status the server can answer, so each one is exported (as 0 until it happens).
constexpr std::array<int, 9> kStatusCodes = {200, 400, 404, 405, 413, 414, 431, 500, 505};

std::string_view status_text(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 505:
      return "HTTP Version Not Supported";
  }
  return "Error";
}

// Why the server refused or closed a connection: the label `reason` of
// ferry_metrics_http_rejected_connections_total.
enum class Rejection { per_source, limit, request_timeout, write_timeout };
constexpr std::array<std::string_view, 4> kRejectionNames = {"per_source", "limit",
                                                             "request_timeout", "write_timeout"};

Rejection rejection_of(SourceRefusal refusal) {
  return refusal == SourceRefusal::per_source ? Rejection::per_source : Rejection::limit;
}

struct ServerCounters {
  std::array<Counter, kStatusCodes.size()> responses;
  std::array<Counter, kRejectionNames.size()> rejected;

  void count_response(int status) {
    auto it = std::find(kStatusCodes.begin(), kStatusCodes.end(), status);
    if (it != kStatusCodes.end()) responses[it - kStatusCodes.begin()].add();
  }
};

class Session;

// What the server and its sessions share. Sessions may outlive the server by a few handler
// invocations after stop(), so they hold this rather than the server.
struct ServerState {
  ServerState(Registry& r, MetricsHttpServerOptions o)
      : registry(r), options(o), budget(o.max_connections, o.max_connections_per_source) {}
  Registry& registry;
  const MetricsHttpServerOptions options;
  ServerCounters counters;
  SourceBudget budget;  // sessions hold leases on it, and a reference to this state
  std::array<LogLimiter, kRejectionNames.size()> rejection_logs;
  bool stopped = false;
  std::unordered_set<Session*> sessions;

  // Counts a refused or cut-off connection and says so in the log, rate-limited per reason;
  // `what()` is only formatted for a line that is logged.
  template <typename What>
  void reject(Rejection why, const std::string& source, const What& what) {
    auto i = static_cast<std::size_t>(why);
    counters.rejected[i].add();
    std::uint64_t suppressed = 0;
    if (rejection_logs[i].allow(suppressed)) {
      log::warning("metrics: {}: {}{}", source, what(), suppressed_note(suppressed));
    }
  }
};

// One response: status line, headers, and (unless HEAD) the body.
void append_response(std::string& out, int status, std::string_view content_type,
                     std::string_view body, bool head, bool close,
                     std::string_view extra_headers = {}) {
  fmt::format_to(std::back_inserter(out),
                 "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}{}\r\n", status,
                 status_text(status), content_type, body.size(), extra_headers,
                 close ? "Connection: close\r\n" : "");
  if (!head) out += body;
}

// One client connection: reads request heads, answers them in order, closes on errors, on
// "Connection: close"/HTTP/1.0, on timeouts and on stop().
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerState> state, tcp::socket socket, SourceLease lease)
      : state_(std::move(state)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        lease_(std::move(lease)) {}
  ~Session() { state_->sessions.erase(this); }

  void start() {
    state_->sessions.insert(this);
    begin_request();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    lease_.reset();  // the budget is back before the client can see the close
    error_code ignored;
    socket_.close(ignored);
    deadline_.cancel();
  }

 private:
  bool done() const { return closed_ || state_->stopped; }

  // A new request head has `request_timeout` to arrive, counted from now.
  void begin_request() {
    phase_ = Phase::reading;
    arm_deadline(state_->options.request_timeout);
    serve_buffered();
  }

  // Answers every complete request in `in_`, then writes the answers or reads more.
  void serve_buffered() {
    while (!close_after_write_ && out_.size() < kMaxPendingAnswerBytes) {
      http::ParseResult result = http::parse_request(in_);
      if (std::holds_alternative<http::NeedMore>(result)) break;
      if (auto* error = std::get_if<http::ParseError>(&result)) {
        std::string_view allow = error->status == 405 ? "Allow: GET, HEAD\r\n" : "";
        append_response(out_, error->status, "text/plain; charset=utf-8", error->reason + "\n",
                        false, true, allow);
        state_->counters.count_response(error->status);
        close_after_write_ = true;
        break;
      }
      const auto& request = std::get<http::Request>(result);
      answer(request);
      in_.erase(0, request.request_bytes);
      if (!request.keep_alive) close_after_write_ = true;
    }
    if (!out_.empty()) {
      write_responses();
    } else {
      read_more();
    }
  }

  void answer(const http::Request& request) {
    bool head = request.method == "HEAD";
    bool close = !request.keep_alive;
    std::string_view path = request.path();
    if (path == "/metrics") {
      std::string body;
      try {
        body = encode_prometheus(state_->registry.snapshot());
      } catch (const std::exception& e) {
        // A collector bug must not take the control thread down; it shows up as 500 and a log.
        log::error("metrics: snapshot failed: {}", e.what());
        append_response(out_, 500, "text/plain; charset=utf-8", "snapshot failed\n", head, close);
        state_->counters.count_response(500);
        return;
      }
      append_response(out_, 200, kPrometheusContentType, body, head, close);
      state_->counters.count_response(200);
    } else if (path == "/") {
      append_response(out_, 200, "text/html; charset=utf-8", kIndexPage, head, close);
      state_->counters.count_response(200);
    } else {
      append_response(out_, 404, "text/plain; charset=utf-8", "not found\n", head, close);
      state_->counters.count_response(404);
    }
  }

  void read_more() {
    socket_.async_read_some(
        asio::buffer(chunk_),
        [self = shared_from_this()](error_code ec, std::size_t n) { self->on_read(ec, n); });
  }

  void on_read(error_code ec, std::size_t n) {
    if (done()) return;
    if (ec) {
      close();  // EOF, reset, or the deadline closed the socket
      return;
    }
    std::size_t before = in_.size();
    in_.append(chunk_.data(), n);
    // The parser starts over on every call; only a line end can complete a request, so parse
    // again only then, on a request's first bytes (to reject garbage at once), or every KiB
    // (to notice the size limits). This bounds the work a one-byte-at-a-time client causes.
    bool worth_parsing = before == 0 || std::memchr(chunk_.data(), '\n', n) != nullptr ||
                         before / 1024 != in_.size() / 1024;
    if (worth_parsing) {
      serve_buffered();
    } else {
      read_more();
    }
  }

  void write_responses() {
    phase_ = Phase::writing;
    arm_deadline(state_->options.write_timeout);
    asio::async_write(
        socket_, asio::buffer(out_),
        [self = shared_from_this()](error_code ec, std::size_t) { self->on_written(ec); });
  }

  void on_written(error_code ec) {
    if (done()) return;
    if (ec) {
      close();
      return;
    }
    out_.clear();
    ++answered_batches_;
    if (close_after_write_) {
      drain_and_close();
    } else {
      begin_request();
    }
  }

  // Sends FIN, then reads and discards what the client still sends until it closes too: closing
  // with unread input would make the kernel send RST, which can destroy the answer in flight.
  void drain_and_close() {
    phase_ = Phase::draining;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    in_.clear();
    arm_deadline(state_->options.request_timeout);
    drain();
  }

  void drain() {
    socket_.async_read_some(asio::buffer(chunk_),
                            [self = shared_from_this()](error_code ec, std::size_t n) {
                              if (self->done()) return;
                              self->drained_bytes_ += n;
                              if (ec || self->drained_bytes_ > kMaxDrainBytes) {
                                self->close();
                                return;
                              }
                              self->drain();
                            });
  }

  void arm_deadline(std::chrono::milliseconds timeout) {
    deadline_.expires_after(timeout);
    deadline_.async_wait([weak = weak_from_this()](error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->done()) return;
      // A re-arm may race with an expiry already queued; only a deadline really past counts.
      if (self->deadline_.expiry() > asio::steady_timer::clock_type::now()) return;
      self->count_timeout();
      self->close();
    });
  }

  // A slow or half request head, or a client not taking its answer, is counted and logged; a
  // kept-alive connection that simply sent nothing more after its answers is not.
  void count_timeout() {
    const MetricsHttpServerOptions& o = state_->options;
    if (phase_ == Phase::writing) {
      state_->reject(Rejection::write_timeout, lease_.slot(), [&] {
        return fmt::format("the answer was not taken within {} ms; closing",
                           o.write_timeout.count());
      });
    } else if (phase_ == Phase::reading && (!in_.empty() || answered_batches_ == 0)) {
      state_->reject(Rejection::request_timeout, lease_.slot(), [&] {
        return fmt::format(
            "no complete request head within {} ms (metrics.request_timeout_ms); "
            "closing",
            o.request_timeout.count());
      });
    }
  }

  enum class Phase { reading, writing, draining };

  std::shared_ptr<ServerState> state_;  // before lease_: the lease gives back into its budget
  tcp::socket socket_;
  asio::steady_timer deadline_;
  SourceLease lease_;  // its slot is the client's address
  Phase phase_ = Phase::reading;
  std::size_t answered_batches_ = 0;
  std::array<char, 4096> chunk_;
  std::string in_;   // received, not yet answered
  std::string out_;  // answers not yet written
  std::size_t drained_bytes_ = 0;
  bool close_after_write_ = false;
  bool closed_ = false;
};

tcp::endpoint to_asio(const net::Endpoint& e) {
  if (e.address.is_v4()) {
    asio::ip::address_v4::bytes_type b;
    std::copy_n(e.address.bytes.begin(), b.size(), b.begin());
    return {asio::ip::address_v4(b), e.port};
  }
  asio::ip::address_v6::bytes_type b;
  std::copy_n(e.address.bytes.begin(), b.size(), b.begin());
  return {asio::ip::address_v6(b), e.port};
}

void collect(const ServerCounters& counters, SnapshotBuilder& b) {
  static constexpr const char* kRequestsHelp = "HTTP requests to the metrics endpoint, by status.";
  for (std::size_t i = 0; i < kStatusCodes.size(); ++i) {
    b.counter("ferry_metrics_http_requests_total", kRequestsHelp,
              {{"code", std::to_string(kStatusCodes[i])}},
              static_cast<double>(counters.responses[i].value()));
  }
  static constexpr const char* kRejectedHelp =
      "Metrics endpoint connections refused at accept (per_source: the client address holds its "
      "budget; limit: all are taken) or closed by a deadline (request_timeout: a slow or half "
      "request head; write_timeout: an answer not taken).";
  for (std::size_t i = 0; i < kRejectionNames.size(); ++i) {
    b.counter("ferry_metrics_http_rejected_connections_total", kRejectedHelp,
              {{"reason", std::string(kRejectionNames[i])}},
              static_cast<double>(counters.rejected[i].value()));
  }
}

std::string remote_address(const tcp::socket& socket) {
  error_code ec;
  tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return "unknown";
  asio::ip::address address = remote.address();
  // An IPv4 client of a dual-stack listener is the same client as over IPv4.
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  }
  return address.to_string();
}

}  // namespace

struct MetricsHttpServer::Impl {
  Impl(asio::io_context& io, const net::Endpoint& listen, Registry& registry,
       MetricsHttpServerOptions options)
      : listen(listen),
        state(std::make_shared<ServerState>(registry, options)),
        acceptor(io),
        accept_retry(io) {
    collector = registry.add([state = state](SnapshotBuilder& b) { collect(state->counters, b); });
  }

  void accept() {
    acceptor.async_accept([this, state = state](error_code ec, tcp::socket socket) {
      // `this` is alive while the acceptor is open: stop() closes it before Impl goes away.
      if (state->stopped || !accepting || ec == asio::error::operation_aborted) return;
      if (ec) {
        // Typically EMFILE: retry after a pause instead of spinning on the failing accept.
        log::warning("metrics.listen {}: accept failed: {}", listen.to_string(), ec.message());
        accept_retry.expires_after(kAcceptRetryDelay);
        accept_retry.async_wait([this, state](error_code ec) {
          if (!ec && !state->stopped) accept();
        });
        return;
      }
      std::string source = remote_address(socket);
      SourceAdmission admission = state->budget.admit(source);
      if (auto* refusal = std::get_if<SourceRefusal>(&admission)) {
        state->reject(rejection_of(*refusal), source, [&] {
          return *refusal == SourceRefusal::per_source
                     ? fmt::format(
                           "refusing a connection: this address holds {}, its budget "
                           "(metrics.max_connections_per_source)",
                           state->budget.per_source())
                     : fmt::format(
                           "refusing a connection: {} are open, the limit "
                           "(metrics.max_connections)",
                           state->budget.max_connections());
        });
        error_code ignored;
        socket.close(ignored);
      } else {
        std::make_shared<Session>(state, std::move(socket),
                                  std::get<SourceLease>(std::move(admission)))
            ->start();
      }
      accept();
    });
  }

  net::Endpoint listen;
  UniqueFd inherited;     // a handover's listening socket, until start() takes it
  bool accepting = true;  // false once a successor accepts instead (a handover)
  std::shared_ptr<ServerState> state;
  tcp::acceptor acceptor;
  asio::steady_timer accept_retry;
  Registry::Handle collector;
};

MetricsHttpServer::MetricsHttpServer(asio::io_context& io, const net::Endpoint& listen,
                                     Registry& registry, MetricsHttpServerOptions options)
    : impl_(std::make_unique<Impl>(io, listen, registry, options)) {}

MetricsHttpServer::~MetricsHttpServer() {
  stop();
}

void MetricsHttpServer::start() {
  if (impl_->acceptor.is_open() || impl_->state->stopped) {
    throw std::logic_error("MetricsHttpServer::start called twice");
  }
  tcp::endpoint endpoint = to_asio(impl_->listen);
  auto fail = [&](const error_code& ec) {
    error_code ignored;
    impl_->acceptor.close(ignored);
    throw std::runtime_error(
        fmt::format("metrics.listen {}: {}", impl_->listen.to_string(), ec.message()));
  };
  error_code ec;
  if (impl_->inherited) {
    impl_->acceptor.assign(endpoint.protocol(), impl_->inherited.get(), ec);
    if (ec) fail(ec);
    impl_->inherited.release();
  } else {
    impl_->acceptor.open(endpoint.protocol(), ec);
    if (ec) fail(ec);
    impl_->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (ec) fail(ec);
    impl_->acceptor.bind(endpoint, ec);
    if (ec) fail(ec);
    impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) fail(ec);
  }
  log::info("metrics: serving http://{}/metrics", local_endpoint().to_string());
  impl_->accept();
}

void MetricsHttpServer::inherit(UniqueFd listening) {
  impl_->inherited = std::move(listening);
}

int MetricsHttpServer::listening_fd() const {
  return impl_->acceptor.is_open() ? impl_->acceptor.native_handle() : -1;
}

void MetricsHttpServer::stop_accepting() {
  error_code ignored;
  impl_->accepting = false;
  impl_->acceptor.close(ignored);
  impl_->accept_retry.cancel();
}

void MetricsHttpServer::stop() {
  ServerState& state = *impl_->state;
  if (state.stopped) return;
  state.stopped = true;
  error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->accept_retry.cancel();
  // close() does not remove the session from the set (its destructor does), but copy anyway
  // so the iteration cannot be disturbed.
  std::vector<Session*> sessions(state.sessions.begin(), state.sessions.end());
  for (Session* session : sessions) session->close();
}

net::Endpoint MetricsHttpServer::local_endpoint() const {
  error_code ec;
  tcp::endpoint endpoint = impl_->acceptor.local_endpoint(ec);
  if (ec) return impl_->listen;
  auto bound = net::Endpoint::from_sockaddr(endpoint.data(), endpoint.size());
  return bound ? *bound : impl_->listen;
}

}  // namespace ferry::metrics
