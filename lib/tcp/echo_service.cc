// A TCP echo service on the runtime (see echo_service.hh).
#include "lib/tcp/echo_service.hh"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstring>

#include "lib/common/log.hh"
#include "lib/runtime/io.hh"
#include "lib/runtime/worker.hh"

namespace ferry::tcp {

void SessionTracker::ended() {
  if (live_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    std::lock_guard lock(mutex_);
    cv_.notify_all();
  }
}

bool SessionTracker::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return cv_.wait_for(lock, timeout, [this] { return live() <= 0; });
}

EchoService::EchoService(std::string name, net::Endpoint configured, ListenerMode mode,
                         std::uint32_t workers, bool multishot_accept, SessionTracker& sessions)
    : ListeningService(configured, mode, workers, multishot_accept),
      name_(std::move(name)),
      sessions_(sessions),
      workers_(workers),
      counters_(std::make_unique<EchoCounters[]>(workers)) {}

EchoService::~EchoService() = default;

void EchoService::accepted(runtime::Worker& worker, UniqueFd conn) {
  int one = 1;
  ::setsockopt(conn.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  counters_[worker.index()].accepted.add();
  sessions_.started();
  worker.runtime().spawn(echo_session(worker, shared_from_this(), std::move(conn)));
}

void EchoService::accept_failed(runtime::Worker& worker, int error) {
  metrics::Counter& errors = counters_[worker.index()].accept_errors;
  errors.add();
  if (errors.value() == 1 || errors.value() % 1000 == 0) {
    log::warning("service {}: accept on {} failed: {} ({} so far on {})", name_,
                 bound().to_string(), std::strerror(error), errors.value(), worker.name());
  }
}

void EchoService::end_connections(runtime::Runtime& runtime) {
  for (std::uint32_t w = 0; w < workers_; ++w) {
    // The owner tag is this object's address: keep it alive (and unique) until every worker
    // has looked.
    runtime.post(w, [self = shared_from_this()](runtime::Worker& worker) {
      worker.shutdown_streams(self.get());
    });
  }
}

std::int64_t EchoService::open_connections() const {
  std::uint64_t accepted = 0;
  std::uint64_t closed = 0;
  for (std::uint32_t w = 0; w < workers_; ++w) {
    accepted += counters_[w].accepted.value();
    closed += counters_[w].stream.closed.value();
  }
  return accepted >= closed ? static_cast<std::int64_t>(accepted - closed) : 0;
}

void EchoService::collect(metrics::SnapshotBuilder& out) const {
  std::uint64_t accepted = 0;
  std::uint64_t errors = 0;
  std::uint64_t bytes = 0;
  for (std::uint32_t w = 0; w < workers_; ++w) {
    accepted += counters_[w].accepted.value();
    errors += counters_[w].accept_errors.value();
    bytes += counters_[w].stream.released_bytes.value();
  }
  const metrics::Labels labels = {{"service", name_}};
  out.counter("ferry_tcp_connections_accepted_total", "TCP connections accepted.", labels,
              static_cast<double>(accepted));
  out.gauge("ferry_tcp_connections_open", "TCP connections accepted and not yet closed.", labels,
            static_cast<double>(open_connections()));
  out.counter("ferry_tcp_accept_errors_total",
              "Failed accepts (fd or memory exhaustion backs off for 100 ms).", labels,
              static_cast<double>(errors));
  out.counter("ferry_tcp_echo_bytes_total", "Bytes an echo service received and sent back.", labels,
              static_cast<double>(bytes));
}

runtime::Task echo_session(runtime::Worker& home, std::shared_ptr<EchoService> service,
                           UniqueFd fd) {
  runtime::RecvStream stream(home, fd.get(), service.get(),
                             &service->counters(home.index()).stream);
  runtime::RecvBatch batch;
  std::vector<iovec> cursor;
  // next() gives the previous batch back to the ring first: buffers are held exactly until the
  // send of their bytes completed.
  while (co_await stream.next(batch)) {
    const std::int64_t sent = co_await runtime::send_all(fd.get(), batch.spans, cursor);
    if (sent < 0) break;
  }
  co_await stream.close(batch);
  service->sessions().ended();
}

}  // namespace ferry::tcp
