// One proxied connection: connect with retries, then forward both ways (see proxy_session.hh).
#include "lib/proxy/proxy_session.hh"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>

#include "lib/common/log.hh"
#include "lib/proxy/proxy_header.hh"
#include "lib/runtime/connect.hh"
#include "lib/runtime/io.hh"
#include "lib/runtime/recv_once.hh"
#include "lib/runtime/recv_stream.hh"
#include "lib/runtime/worker.hh"

namespace ferry::proxy {
namespace {

constexpr std::size_t kMaxAttempts = 16;  // tcp.proxy.connect_attempts is at most 16

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The client's address and the VIP:port it connected to: the accepted socket's own, or what
// the client's PROXY protocol header carried.
struct ConnectionEnds {
  net::Endpoint client;
  net::Endpoint vip;
  bool known = false;  // the names needed were read (a socket reset at once may have none)
};

// The client's address (for the balance hash), and the VIP only when `with_vip` (an outgoing
// PROXY header needs it): one system call per connection when no header is sent.
ConnectionEnds socket_ends(int fd, bool with_vip) {
  ConnectionEnds ends;
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) return ends;
  auto c = net::Endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&peer), peer_len);
  if (!c) return ends;
  ends.client = *c;
  if (with_vip) {
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) return ends;
    auto v = net::Endpoint::from_sockaddr(reinterpret_cast<sockaddr*>(&local), local_len);
    if (!v) return ends;
    ends.vip = *v;
  }
  ends.known = true;
  return ends;
}

// The bytes a client sent first: its PROXY header and the client data read with it.
struct ClientStart {
  std::array<std::uint8_t, pp::kMaxHeaderBytes> bytes{};
  std::size_t received = 0;
  std::size_t header_bytes = 0;
  std::span<const std::uint8_t> data() const {
    return {bytes.data() + header_bytes, received - header_bytes};
  }
};

void count_rejected(Session* s, HeaderReject reason, const char* why) {
  ProxyService& svc = *s->service;
  std::atomic<std::uint64_t>& counter =
      svc.counters().header_rejected[static_cast<std::size_t>(reason)];
  bump(counter);
  const std::uint64_t n = read(counter);
  if (n == 1 || n % 1000 == 0) {
    log::warning("service {}: client reset: PROXY protocol header {}: {} ({} so far)", svc.name(),
                 kHeaderRejectNames[static_cast<std::size_t>(reason)], why, n);
  }
  abort_socket(s->client.get());
}

// The last task of a session to end frees it and gives its slot back to the limits.
void end_session(Session* s) {
  ProxyService& service = *s->service;
  service.unlink(*s);
  if (s->target != nullptr) s->target->stats->active.fetch_sub(1, std::memory_order_relaxed);
  service.counters().active.fetch_sub(1, std::memory_order_relaxed);
  service.shared().active.fetch_sub(1, std::memory_order_relaxed);
  tcp::SessionTracker& tracker = service.sessions();
  delete s;  // closes both sockets (an aborted one already sent its RST)
  tracker.ended();
}

// Where reading an accepted PROXY header stands after one recv.
struct HeaderStep {
  bool finished = false;  // read no more: the header is whole, or `rejected` says why not
  std::optional<HeaderReject> rejected;
  const char* why = "";
};

HeaderReject header_reject_of(pp::Reject reason) {
  return reason == pp::Reject::absent     ? HeaderReject::absent
         : reason == pp::Reject::too_long ? HeaderReject::too_long
                                          : HeaderReject::malformed;
}

// Adds one recv's result `n` (bytes, 0 at EOF, or a negative errno) to what the client sent so
// far and judges the header; a whole one with addresses names the connection's ends.
HeaderStep take_header_bytes(int n, ClientStart& start, ConnectionEnds& ends) {
  if (n <= 0) {
    if (n == -ETIMEDOUT) return {true, HeaderReject::timeout, "not complete within 3 s"};
    return {true, HeaderReject::truncated, "the client closed before its end"};
  }
  start.received += static_cast<std::size_t>(n);
  const pp::ParseResult r = pp::parse(std::span(start.bytes.data(), start.received));
  if (r.status == pp::Status::done) {
    start.header_bytes = r.consumed;
    if (r.has_addresses) {
      ends.client = r.source;
      ends.vip = r.destination;
      ends.known = true;
    }
    return {true, std::nullopt, ""};
  }
  if (r.status == pp::Status::rejected) return {true, header_reject_of(r.reason), r.why};
  if (start.received == start.bytes.size()) {  // the parser bounds itself below this
    return {true, HeaderReject::too_long, "longer than 536 bytes"};
  }
  return {};
}

// The backends one session tries, in order: none twice, at most connect_attempts of them.
struct ConnectAttempts {
  std::array<std::uint16_t, kMaxAttempts> tried{};
  std::size_t count = 0;

  // The next backend to try (a retry after the first is counted), or nullptr when none is left.
  const Backend* next(BackendPool& pool, std::uint64_t hash, ServiceCounters& counters) {
    std::optional<std::uint16_t> pick = pool.pick(hash, std::span(tried.data(), count));
    if (!pick) return nullptr;
    tried[count] = *pick;
    if (count++ > 0) bump(counters.retries);
    return &pool.backend(*pick);
  }
};

// A connected backend socket becomes the session's: its latency and counts go to the backend.
void adopt_backend(Session* s, const Backend& b, UniqueFd fd,
                   std::chrono::steady_clock::time_point started) {
  b.stats->connect_latency.observe(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now() - started)
                                     .count()));
  b.stats->active.fetch_add(1, std::memory_order_relaxed);
  bump(b.stats->total);
  s->backend = std::move(fd);
  s->target = &b;
}

// No backend took the connection (and no sweep reset it meanwhile): counted, logged at the first
// and every 1000th, and the client reset.
void report_no_backend(Session* s, std::size_t attempts) {
  ProxyService& svc = *s->service;
  bump(svc.counters().failed);
  const std::uint64_t failed = read(svc.counters().failed);
  if (failed == 1 || failed % 1000 == 0) {
    log::warning("service {}: no backend reachable after {} attempts; client reset ({} so far)",
                 svc.name(), attempts, failed);
  }
  abort_socket(s->client.get());
}

// What the backend receives before anything forwarded: the outgoing PROXY header, then the
// client data read with an incoming one. The iovecs point into `header` and the ClientStart.
struct FirstBytes {
  pp::Built header;
  std::array<iovec, 2> iov{};
  std::size_t count = 0;
  std::span<const iovec> spans() const { return {iov.data(), count}; }
};

void gather_first_bytes(FirstBytes& first, const ProxySettings& settings,
                        const ConnectionEnds& ends, std::span<const std::uint8_t> early) {
  if (settings.send_header != config::ProxyProtocol::off) {
    const pp::Version version =
        settings.send_header == config::ProxyProtocol::v1 ? pp::Version::v1 : pp::Version::v2;
    first.header =
        ends.known ? pp::build(version, ends.client, ends.vip) : pp::build_unknown(version);
  }
  if (first.header.size > 0)
    first.iov[first.count++] = {first.header.bytes.data(), first.header.size};
  if (!early.empty()) {
    first.iov[first.count++] = {const_cast<std::uint8_t*>(early.data()), early.size()};
  }
}

// One direction: receive from `src` into the home's buffer ring, send the spans to `dst` as
// they are, give them back once sent; EOF becomes shutdown(SHUT_WR), an error a reset of both.
runtime::Task forward(Session* s, bool to_backend) {
  const int src = to_backend ? s->client.get() : s->backend.get();
  const int dst = to_backend ? s->backend.get() : s->client.get();
  const ProxySettings& settings = s->generation->settings;
  ServiceCounters& service = s->service->counters();
  BackendStats& backend = *s->target->stats;
  runtime::RecvStream stream(s->home, src, s->service.get());
  stream.set_water_marks(settings.high_water_bytes, settings.low_water_bytes);
  // While backpressure pauses `src`, this task may sit in send_all to a peer that reads nothing;
  // a reset of `src` then aborts the pair from the home worker, which fails that send.
  stream.set_reset_handler([](void* session) { static_cast<Session*>(session)->abort(); }, s);
  runtime::RecvBatch batch;
  std::vector<iovec> cursor;
  for (;;) {
    if (!co_await stream.next(batch)) {
      if (batch.end == runtime::RecvBatch::End::eof) {
        // Everything received was sent: pass the half-close on (unless the pair was reset).
        if (!s->was_reset()) ::shutdown(dst, SHUT_WR);
      } else {
        s->abort();
      }
      break;
    }
    s->touch();
    const std::int64_t sent = co_await runtime::send_all(dst, batch.spans, cursor);
    if (sent < 0) {
      s->abort();
      break;
    }
    s->touch();
    const auto bytes = static_cast<std::uint64_t>(sent);
    if (to_backend) {
      bump(service.bytes_in, bytes);
      bump(backend.bytes_in, bytes);
    } else {
      bump(service.bytes_out, bytes);
      bump(backend.bytes_out, bytes);
    }
  }
  co_await stream.close(batch);
  // The stream is closed: its home-side counters are final and were published to this task
  // through the queue that resumed it.
  raise_to(service.peak_held_bytes, stream.peak_held_bytes());
  if (s->directions.fetch_sub(1, std::memory_order_acq_rel) == 1) end_session(s);
}

}  // namespace

std::int64_t steady_now_ms() {
  // The coarse clock: no TSC read (the forwarding tasks stamp every batch twice), the same
  // monotonic base, at most one tick (1-10 ms) behind; the idle timeout and the header's
  // deadline count in milliseconds against this same clock.
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return std::int64_t{ts.tv_sec} * 1000 + ts.tv_nsec / 1'000'000;
}

Session::Session(runtime::Worker& home_worker, std::shared_ptr<ProxyService> owner,
                 std::shared_ptr<const Generation> gen, UniqueFd client_fd)
    : home(home_worker),
      service(std::move(owner)),
      generation(std::move(gen)),
      client(std::move(client_fd)),
      last_active_ms(steady_now_ms()) {}

void Session::abort() {
  if (reset.exchange(true, std::memory_order_acq_rel)) return;
  bump(service->counters().resets);
  abort_socket(client.get());
  if (backend_fd >= 0) abort_socket(backend_fd);
}

void Session::touch() {
  last_active_ms.store(steady_now_ms(), std::memory_order_relaxed);
}

runtime::Task proxy_session(runtime::Worker& home, std::shared_ptr<ProxyService> service,
                            std::shared_ptr<const Generation> generation, UniqueFd client) {
  auto* s = new Session(home, std::move(service), std::move(generation), std::move(client));
  ProxyService& svc = *s->service;
  svc.link(*s);
  BackendPool& pool = *s->generation->pool;
  const ProxySettings& settings = s->generation->settings;
  ConnectionEnds ends;  // the accepted socket's names, unless an accepted header gives them
  ClientStart start;
  if (settings.accept_header) {
    // The header first, whole, within kHeaderTimeoutMs of the accept; nothing of the client
    // reaches a backend before it is valid.
    const std::int64_t deadline_ms = steady_now_ms() + kHeaderTimeoutMs;
    HeaderStep step;
    while (!step.finished) {
      const std::int64_t left_ms = deadline_ms - steady_now_ms();
      int n = -ETIMEDOUT;
      if (left_ms > 0) {
        n = co_await runtime::recv_with_timeout(
            s->client.get(), start.bytes.data() + start.received,
            start.bytes.size() - start.received, static_cast<std::uint32_t>(left_ms));
      }
      step = take_header_bytes(n, start, ends);
    }
    if (step.rejected) {
      if (!s->was_reset()) count_rejected(s, *step.rejected, step.why);
      end_session(s);
      co_return;
    }
  }
  if (!ends.known) {
    ends = socket_ends(s->client.get(), settings.send_header != config::ProxyProtocol::off);
  }
  const std::uint64_t hash = ends.known ? client_hash(ends.client.address) : 0;
  ConnectAttempts attempts;
  const std::size_t max_attempts = std::min<std::size_t>(settings.connect_attempts, kMaxAttempts);
  while (attempts.count < max_attempts && !s->was_reset()) {
    const Backend* b = attempts.next(pool, hash, svc.counters());
    if (b == nullptr) break;
    UniqueFd fd(::socket(b->endpoint.address.is_v4() ? AF_INET : AF_INET6,
                         SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      bump(b->stats->connect_failures);
      continue;
    }
    svc.set_backend_fd(*s, fd.get());
    const auto started = std::chrono::steady_clock::now();
    const int rc = co_await runtime::connect_with_timeout(fd.get(), b->address, b->address_len,
                                                          settings.connect_timeout_ms);
    if (rc == 0 && !s->was_reset()) {
      adopt_backend(s, *b, std::move(fd), started);
      break;
    }
    if (!s->was_reset()) bump(b->stats->connect_failures);
    svc.set_backend_fd(*s, -1);
  }
  if (s->target == nullptr) {
    if (!s->was_reset()) report_no_backend(s, attempts.count);
    end_session(s);
    co_return;
  }
  set_nodelay(s->client.get());
  set_nodelay(s->backend.get());
  // The first bytes go before the forwarding starts: nothing of the client can overtake or
  // split them.
  FirstBytes first;
  gather_first_bytes(first, settings, ends, start.data());
  if (first.count > 0) {
    std::vector<iovec> cursor;
    const std::int64_t sent = co_await runtime::send_all(s->backend.get(), first.spans(), cursor);
    if (sent < 0 || s->was_reset()) {
      // The backend went away before the first bytes: an ordinary failed connection.
      s->abort();
      end_session(s);
      co_return;
    }
    const std::size_t early_bytes = start.data().size();
    bump(svc.counters().bytes_in, early_bytes);
    bump(s->target->stats->bytes_in, early_bytes);
  }
  s->touch();
  s->directions.store(2, std::memory_order_release);
  runtime::Runtime& rt = home.runtime();
  rt.spawn(forward(s, true));
  rt.spawn(forward(s, false));
}

}  // namespace ferry::proxy
