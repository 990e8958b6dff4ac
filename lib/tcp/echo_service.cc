// A TCP echo service on the runtime (see echo_service.hh).
#include "lib/tcp/echo_service.hh"

#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "lib/common/log.hh"
#include "lib/runtime/io.hh"
#include "lib/runtime/worker.hh"
#include "lib/uring/uring.hh"

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

// One worker's accept on a listening socket: multishot where the kernel has it (one SQE accepts
// until canceled), re-armed whenever a completion ends it, backing off on fd/memory exhaustion.
class EchoService::Acceptor : public runtime::Completion {
 public:
  Acceptor(EchoService& service, std::uint32_t worker, int fd, UniqueFd owned)
      : Completion(&Acceptor::on_accept),
        service_(service),
        worker_(worker),
        fd_(fd),
        owned_(std::move(owned)),
        retry_(this) {}

  // All of the following run on the acceptor's worker.
  void arm(runtime::Worker& worker) {
    if (state_ == State::closing || state_ == State::closed) return;
    io_uring_sqe* sqe = worker.ring().sqe();
    if (service_.multishot_) {
      io_uring_prep_multishot_accept(sqe, fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    } else {
      io_uring_prep_accept(sqe, fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    }
    io_uring_sqe_set_data64(sqe, user_data());
    state_ = State::armed;
  }

  void close(runtime::Worker& worker) {
    switch (state_) {
      case State::idle:
        finish();
        return;
      case State::armed:
      case State::backing_off: {
        state_ = State::closing;
        io_uring_sqe* sqe = worker.ring().sqe();
        const std::uint64_t target =
            waiting_retry_ ? retry_.user_data() : static_cast<Completion*>(this)->user_data();
        io_uring_prep_cancel64(sqe, target, 0);
        sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
        io_uring_sqe_set_data64(sqe, uring::kIgnoredUserData);
        return;
      }
      case State::closing:
      case State::closed:
        return;
    }
  }

 private:
  enum class State { idle, armed, backing_off, closing, closed };

  struct RetryTimer : runtime::Completion {
    explicit RetryTimer(Acceptor* a) : Completion(&RetryTimer::on_timer), acceptor(a) {}
    static void on_timer(Completion* self, runtime::Worker& worker, const io_uring_cqe&) {
      Acceptor* a = static_cast<RetryTimer*>(self)->acceptor;
      a->waiting_retry_ = false;
      if (a->state_ == State::closing) {
        a->finish();
        return;
      }
      a->arm(worker);
    }
    Acceptor* acceptor;
    __kernel_timespec timeout{.tv_sec = 0, .tv_nsec = 100'000'000};
  };

  static void on_accept(Completion* self, runtime::Worker& worker, const io_uring_cqe& cqe) {
    auto* a = static_cast<Acceptor*>(self);
    a->accepted(worker, cqe);
  }

  void accepted(runtime::Worker& worker, const io_uring_cqe& cqe) {
    EchoCounters& counters = service_.counters(worker_);
    if (cqe.res >= 0) {
      UniqueFd conn(cqe.res);
      if (state_ != State::closing) {
        int one = 1;
        ::setsockopt(conn.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        counters.accepted.add();
        service_.sessions_.started();
        worker.runtime().spawn(echo_session(worker, service_.shared_from_this(), std::move(conn)));
      }
    } else if (cqe.res != -ECANCELED) {
      counters.accept_errors.add();
      if (counters.accept_errors.value() == 1 || counters.accept_errors.value() % 1000 == 0) {
        log::warning("service {}: accept on {} failed: {} ({} so far on {})", service_.name_,
                     service_.bound_.to_string(), std::strerror(-cqe.res),
                     counters.accept_errors.value(), worker.name());
      }
    }
    if ((cqe.flags & IORING_CQE_F_MORE) != 0) return;
    // The accept ended: canceled for good, or to be armed again.
    if (state_ == State::closing) {
      finish();
      return;
    }
    const int error = -cqe.res;
    if (error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM) {
      // Re-arming at once would fail the same way in a loop: wait for fds or memory to free up.
      state_ = State::backing_off;
      waiting_retry_ = true;
      io_uring_sqe* sqe = worker.ring().sqe();
      io_uring_prep_timeout(sqe, &retry_.timeout, 0, 0);
      io_uring_sqe_set_data64(sqe, retry_.user_data());
      return;
    }
    arm(worker);
  }

  void finish() {
    state_ = State::closed;
    owned_.reset();  // a per-worker socket closes with its accept
    service_.acceptor_closed();
  }

  EchoService& service_;
  const std::uint32_t worker_;
  const int fd_;
  UniqueFd owned_;
  State state_ = State::idle;
  bool waiting_retry_ = false;
  RetryTimer retry_;
};

EchoService::EchoService(std::string name, net::Endpoint configured, ListenerMode mode,
                         std::uint32_t workers, bool multishot_accept, SessionTracker& sessions)
    : name_(std::move(name)),
      configured_(configured),
      bound_(configured),
      mode_(mode),
      multishot_(multishot_accept),
      sessions_(sessions),
      counters_(std::make_unique<EchoCounters[]>(workers)),
      workers_(workers) {}

EchoService::~EchoService() = default;

void EchoService::listen(runtime::Runtime& runtime) {
  std::vector<UniqueFd> fds = open_listeners(configured_, mode_, workers_);
  bound_ = bound_endpoint(fds.front().get());
  if (mode_ == ListenerMode::shared) shared_fd_ = std::move(fds.front());
  for (std::uint32_t w = 0; w < workers_; ++w) {
    if (mode_ == ListenerMode::shared) {
      acceptors_.push_back(std::make_unique<Acceptor>(*this, w, shared_fd_.get(), UniqueFd()));
    } else {
      const int fd = fds[w].get();
      acceptors_.push_back(std::make_unique<Acceptor>(*this, w, fd, std::move(fds[w])));
    }
  }
  for (std::uint32_t w = 0; w < workers_; ++w) {
    Acceptor* acceptor = acceptors_[w].get();
    runtime.post(w, [acceptor](runtime::Worker& worker) { acceptor->arm(worker); });
  }
}

void EchoService::acceptor_closed() {
  std::lock_guard lock(close_mutex_);
  ++closed_acceptors_;
  close_cv_.notify_all();
}

bool EchoService::close_listeners(runtime::Runtime& runtime, std::chrono::milliseconds timeout) {
  for (std::uint32_t w = 0; w < acceptors_.size(); ++w) {
    Acceptor* acceptor = acceptors_[w].get();
    runtime.post(w, [acceptor](runtime::Worker& worker) { acceptor->close(worker); });
  }
  std::unique_lock lock(close_mutex_);
  const bool all =
      close_cv_.wait_for(lock, timeout, [this] { return closed_acceptors_ == acceptors_.size(); });
  if (all) shared_fd_.reset();
  return all;
}

void EchoService::shutdown_connections(runtime::Runtime& runtime) {
  for (std::uint32_t w = 0; w < workers_; ++w) {
    // The owner tag is this object's address: keep it alive (and unique) until every worker
    // has looked.
    runtime.post(w, [self = shared_from_this()](runtime::Worker& worker) {
      worker.shutdown_streams(self.get());
    });
  }
}

void EchoService::collect(metrics::SnapshotBuilder& out) const {
  std::uint64_t accepted = 0;
  std::uint64_t errors = 0;
  std::uint64_t bytes = 0;
  std::uint64_t closed = 0;
  for (std::uint32_t w = 0; w < workers_; ++w) {
    accepted += counters_[w].accepted.value();
    errors += counters_[w].accept_errors.value();
    bytes += counters_[w].stream.released_bytes.value();
    closed += counters_[w].stream.closed.value();
  }
  const metrics::Labels labels = {{"service", name_}};
  out.counter("ferry_tcp_connections_accepted_total", "TCP connections accepted.", labels,
              static_cast<double>(accepted));
  out.gauge("ferry_tcp_connections_open", "TCP connections accepted and not yet closed.", labels,
            static_cast<double>(accepted >= closed ? accepted - closed : 0));
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
