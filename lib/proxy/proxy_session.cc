// One proxied connection: connect with retries, then forward both ways (see proxy_session.hh).
#include "lib/proxy/proxy_session.hh"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
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
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
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
    std::optional<HeaderReject> rejected;
    const char* why = "";
    for (;;) {
      const std::int64_t left_ms = deadline_ms - steady_now_ms();
      int n = -ETIMEDOUT;
      if (left_ms > 0) {
        n = co_await runtime::recv_with_timeout(
            s->client.get(), start.bytes.data() + start.received,
            start.bytes.size() - start.received, static_cast<std::uint32_t>(left_ms));
      }
      if (n <= 0) {
        rejected = n == -ETIMEDOUT ? HeaderReject::timeout : HeaderReject::truncated;
        why = n == -ETIMEDOUT ? "not complete within 3 s" : "the client closed before its end";
        break;
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
        break;
      }
      if (r.status == pp::Status::rejected) {
        rejected = r.reason == pp::Reject::absent     ? HeaderReject::absent
                   : r.reason == pp::Reject::too_long ? HeaderReject::too_long
                                                      : HeaderReject::malformed;
        why = r.why;
        break;
      }
      if (start.received == start.bytes.size()) {  // the parser bounds itself below this
        rejected = HeaderReject::too_long;
        why = "longer than 536 bytes";
        break;
      }
    }
    if (rejected) {
      if (!s->was_reset()) count_rejected(s, *rejected, why);
      end_session(s);
      co_return;
    }
  }
  if (!ends.known) {
    ends = socket_ends(s->client.get(), settings.send_header != config::ProxyProtocol::off);
  }
  const std::uint64_t hash = ends.known ? client_hash(ends.client.address) : 0;
  std::array<std::uint16_t, kMaxAttempts> tried{};
  std::size_t attempts = 0;
  const std::size_t max_attempts = std::min<std::size_t>(settings.connect_attempts, kMaxAttempts);
  while (attempts < max_attempts && !s->was_reset()) {
    std::optional<std::uint16_t> pick = pool.pick(hash, std::span(tried.data(), attempts));
    if (!pick) break;
    tried[attempts] = *pick;
    if (attempts++ > 0) bump(svc.counters().retries);
    const Backend& b = pool.backend(*pick);
    UniqueFd fd(::socket(b.endpoint.address.is_v4() ? AF_INET : AF_INET6,
                         SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) {
      bump(b.stats->connect_failures);
      continue;
    }
    svc.set_backend_fd(*s, fd.get());
    const auto started = std::chrono::steady_clock::now();
    const int rc = co_await runtime::connect_with_timeout(fd.get(), b.address, b.address_len,
                                                          settings.connect_timeout_ms);
    if (rc == 0 && !s->was_reset()) {
      b.stats->connect_latency.observe(
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - started)
                                         .count()));
      b.stats->active.fetch_add(1, std::memory_order_relaxed);
      bump(b.stats->total);
      s->backend = std::move(fd);
      s->target = &b;
      break;
    }
    if (!s->was_reset()) bump(b.stats->connect_failures);
    svc.set_backend_fd(*s, -1);
  }
  if (s->target == nullptr) {
    if (!s->was_reset()) {
      bump(svc.counters().failed);
      const std::uint64_t failed = read(svc.counters().failed);
      if (failed == 1 || failed % 1000 == 0) {
        log::warning("service {}: no backend reachable after {} attempts; client reset ({} so far)",
                     svc.name(), attempts, failed);
      }
      abort_socket(s->client.get());
    }
    end_session(s);
    co_return;
  }
  set_nodelay(s->client.get());
  set_nodelay(s->backend.get());
  // The outgoing header, then the client data read with an incoming one, both before the
  // forwarding starts: nothing of the client can overtake or split them.
  pp::Built header;
  if (settings.send_header != config::ProxyProtocol::off) {
    const pp::Version version =
        settings.send_header == config::ProxyProtocol::v1 ? pp::Version::v1 : pp::Version::v2;
    header = ends.known ? pp::build(version, ends.client, ends.vip) : pp::build_unknown(version);
  }
  const std::span<const std::uint8_t> early = start.data();
  if (header.size > 0 || !early.empty()) {
    std::array<iovec, 2> first{};
    std::size_t count = 0;
    if (header.size > 0) first[count++] = {header.bytes.data(), header.size};
    if (!early.empty()) {
      first[count++] = {const_cast<std::uint8_t*>(early.data()), early.size()};
    }
    std::vector<iovec> cursor;
    const std::int64_t sent =
        co_await runtime::send_all(s->backend.get(), std::span(first.data(), count), cursor);
    if (sent < 0 || s->was_reset()) {
      // The backend went away before the first bytes: an ordinary failed connection.
      s->abort();
      end_session(s);
      co_return;
    }
    bump(svc.counters().bytes_in, early.size());
    bump(s->target->stats->bytes_in, early.size());
  }
  s->touch();
  s->directions.store(2, std::memory_order_release);
  runtime::Runtime& rt = home.runtime();
  rt.spawn(forward(s, true));
  rt.spawn(forward(s, false));
}

}  // namespace ferry::proxy
