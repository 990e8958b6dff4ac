// A service's listening sockets and per-worker accepts (see listener_group.hh).
#include "lib/tcp/listener_group.hh"

#include <liburing.h>
#include <sys/socket.h>

#include <cerrno>

#include "lib/runtime/completion.hh"
#include "lib/runtime/worker.hh"
#include "lib/uring/uring.hh"

namespace ferry::tcp {

// One worker's accept on a listening socket: multishot where the kernel has it (one SQE accepts
// until canceled), re-armed whenever a completion ends it, backing off on fd/memory exhaustion.
class ListenerGroup::Acceptor : public runtime::Completion {
 public:
  Acceptor(ListenerGroup& group, int fd, UniqueFd owned)
      : Completion(&Acceptor::on_accept),
        group_(group),
        fd_(fd),
        owned_(std::move(owned)),
        retry_(this) {}

  int fd() const { return fd_; }

  // All of the following run on the acceptor's worker.
  void arm(runtime::Worker& worker) {
    if (state_ == State::closing || state_ == State::closed) return;
    io_uring_sqe* sqe = worker.ring().sqe();
    if (group_.multishot_) {
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
    static_cast<Acceptor*>(self)->accepted(worker, cqe);
  }

  void accepted(runtime::Worker& worker, const io_uring_cqe& cqe) {
    if (cqe.res >= 0) {
      // Served even while closing: the kernel accepted it before the cancel reached the accept.
      // Closing it here would reset a client that may already have sent, and in an upgrade the
      // new ferryd serves every connection still queued on the same socket, so this one would
      // be the only one lost. close() returns only after this completion and before the service
      // ends its connections, so it drains with the rest; unless close() gave up waiting.
      UniqueFd conn(cqe.res);
      if (state_ != State::closing || !group_.abandoned_.load(std::memory_order_acquire)) {
        group_.sink_.accepted(worker, std::move(conn));
      }
    } else if (cqe.res != -ECANCELED) {
      group_.sink_.accept_failed(worker, -cqe.res);
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
    group_.acceptor_closed();
  }

  ListenerGroup& group_;
  const int fd_;
  UniqueFd owned_;
  State state_ = State::idle;
  bool waiting_retry_ = false;
  RetryTimer retry_;
};

ListenerGroup::ListenerGroup(net::Endpoint configured, ListenerMode mode, std::uint32_t workers,
                             bool multishot_accept, AcceptSink& sink)
    : configured_(configured),
      bound_(configured),
      mode_(mode),
      multishot_(multishot_accept),
      workers_(workers),
      sink_(sink) {}

ListenerGroup::~ListenerGroup() = default;

void ListenerGroup::listen(runtime::Runtime& runtime, std::vector<UniqueFd> inherited) {
  std::vector<UniqueFd> fds = std::move(inherited);
  if (fds.empty()) {
    fds = open_listeners(configured_, mode_, workers_);
  } else if (mode_ == ListenerMode::reuseport) {
    // Fewer handed over than workers here: the rest join the same SO_REUSEPORT group.
    net::Endpoint same = bound_endpoint(fds.front().get());
    while (fds.size() < workers_) fds.push_back(open_listener(same, true));
  }
  bound_ = bound_endpoint(fds.front().get());
  if (mode_ == ListenerMode::shared && fds.size() == 1) {
    shared_fd_ = std::move(fds.front());
    for (std::uint32_t w = 0; w < workers_; ++w) {
      acceptors_.push_back(std::make_unique<Acceptor>(*this, shared_fd_.get(), UniqueFd()));
    }
  } else {
    // One accept per socket, the sockets spread over the workers.
    for (UniqueFd& fd : fds) {
      const int raw = fd.get();
      acceptors_.push_back(std::make_unique<Acceptor>(*this, raw, std::move(fd)));
    }
  }
  for (std::size_t i = 0; i < acceptors_.size(); ++i) {
    Acceptor* acceptor = acceptors_[i].get();
    runtime.post(static_cast<std::uint32_t>(i % workers_),
                 [acceptor](runtime::Worker& worker) { acceptor->arm(worker); });
  }
}

std::vector<int> ListenerGroup::fds() const {
  if (shared_fd_) return {shared_fd_.get()};
  std::vector<int> out;
  for (const auto& a : acceptors_) out.push_back(a->fd());
  return out;
}

void ListenerGroup::acceptor_closed() {
  std::lock_guard lock(close_mutex_);
  ++closed_acceptors_;
  close_cv_.notify_all();
}

bool ListenerGroup::close(runtime::Runtime& runtime, std::chrono::milliseconds timeout) {
  for (std::size_t i = 0; i < acceptors_.size(); ++i) {
    Acceptor* acceptor = acceptors_[i].get();
    runtime.post(static_cast<std::uint32_t>(i % workers_),
                 [acceptor](runtime::Worker& worker) { acceptor->close(worker); });
  }
  std::unique_lock lock(close_mutex_);
  const bool all =
      close_cv_.wait_for(lock, timeout, [this] { return closed_acceptors_ == acceptors_.size(); });
  if (all) {
    shared_fd_.reset();
  } else {
    abandoned_.store(true, std::memory_order_release);
  }
  return all;
}

}  // namespace ferry::tcp
