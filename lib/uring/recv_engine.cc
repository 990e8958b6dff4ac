// The receive path of one worker: per socket one recv on the shared buffer ring (bundled and
// multishot where the kernel allows), completions turned into span lists without copying, and the
// recv lifecycle: re-arm when a recv ends, park on a dry ring until buffers come back, close
// cleanly on EOF, error or cancel, never two recvs outstanding on one socket.
#include "lib/uring/recv_engine.hh"

#include <poll.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cerrno>

#include "lib/uring/uring_compat.hh"

namespace ferry::uring {
namespace {

// The engine keeps two FIFO lists threaded through its sockets (parked; credit holders); these
// link and unlink one through the given pair of member pointers.
using Link = RecvSocket* RecvSocket::*;

template <Link Prev, Link Next>
void push_back(RecvSocket& socket, RecvSocket*& head, RecvSocket*& tail) {
  socket.*Prev = tail;
  socket.*Next = nullptr;
  if (tail != nullptr) {
    tail->*Next = &socket;
  } else {
    head = &socket;
  }
  tail = &socket;
}

template <Link Prev, Link Next>
void unlink(RecvSocket& socket, RecvSocket*& head, RecvSocket*& tail) {
  if (socket.*Prev != nullptr) {
    (socket.*Prev)->*Next = socket.*Next;
  } else {
    head = socket.*Next;
  }
  if (socket.*Next != nullptr) {
    (socket.*Next)->*Prev = socket.*Prev;
  } else {
    tail = socket.*Prev;
  }
  socket.*Prev = socket.*Next = nullptr;
}

}  // namespace

RecvEngine::RecvEngine(Uring& ring, BufferRing& buffers, const RecvModes& modes,
                       RecvCounters& counters, const RecvLimits& limits)
    : ring_(ring),
      buffers_(buffers),
      modes_(modes),
      counters_(counters),
      spans_(buffers.count()),
      limits_(limits) {
  modes_.incremental = buffers.incremental();
  const std::uint64_t ring_bytes = buffers.total_bytes();
  if (limits_.socket_cap_bytes > ring_bytes) {
    limits_.socket_cap_bytes = static_cast<std::uint32_t>(ring_bytes);
  }
  // Without incremental buffers a completion takes whole buffers: less than one buffer of
  // credit could not cover any completion.
  if (!modes_.incremental) limits_.min_bytes = std::max(limits_.min_bytes, buffers.buffer_bytes());
  limits_.min_bytes =
      std::max<std::uint32_t>(1, std::min(limits_.min_bytes, limits_.socket_cap_bytes));
}

std::uint32_t RecvEngine::next_limit_bytes(const RecvSocket& socket) const {
  // A new socket starts at the cap: its first message then begins a recv, so a recv that ends at
  // its limit ends at a message boundary when messages are the cap's size (one completion each).
  return socket.want_bytes_ != 0 ? socket.want_bytes_ : limits_.socket_cap_bytes;
}

std::uint64_t RecvEngine::worst_ring_bytes(std::uint64_t limit_left_bytes) const {
  // Incremental buffers are consumed byte for byte; whole ones a buffer at a time (a bundle fills
  // each to its end before the next, so only its last one is partly used).
  if (modes_.incremental) return limit_left_bytes;
  const std::uint64_t b = buffers_.buffer_bytes();
  return (limit_left_bytes + b - 1) / b * b;
}

bool RecvEngine::start(RecvSocket& socket) {
  if (socket.state_ != RecvSocket::State::idle) return false;
  socket.started_ = true;
  if (capped() && (parked_head_ != nullptr || !credit_available(socket))) {
    park(socket);  // its first recv waits for credit like any re-arm
    return true;
  }
  arm(socket);
  return true;
}

std::uint64_t RecvEngine::spare_credit() const {
  const std::uint64_t free = buffers_.free_bytes();
  const std::uint64_t spare = free >= lent_ ? free - lent_ : 0;
  // Without incremental buffers only whole buffers can be lent.
  if (modes_.incremental) return spare;
  return spare / buffers_.buffer_bytes() * buffers_.buffer_bytes();
}

bool RecvEngine::credit_available(const RecvSocket& socket) const {
  // Its whole limit while other recvs hold credit (theirs comes back when they end). With none
  // lent, waiting could be for ever (consumers may hold buffers until this socket receives), so
  // then its floor is enough and it is armed with what is spare.
  const std::uint64_t spare = spare_credit();
  const std::uint32_t limit = recv_limit(socket);
  if (spare >= worst_ring_bytes(limit)) return true;
  return lent_ == 0 && spare >= worst_ring_bytes(std::min(limit, limits_.min_bytes));
}

void RecvEngine::take_credit(RecvSocket& socket, std::uint64_t bytes) {
  socket.credit_bytes_ = bytes;
  lent_ += bytes;
  socket.active_at_ = now();
  socket.holder_ = true;
  push_back<&RecvSocket::holder_prev_, &RecvSocket::holder_next_>(socket, holders_head_,
                                                                  holders_tail_);
}

void RecvEngine::return_credit(RecvSocket& socket) {
  if (!socket.holder_) return;
  lent_ -= socket.credit_bytes_;
  socket.credit_bytes_ = 0;
  unlink<&RecvSocket::holder_prev_, &RecvSocket::holder_next_>(socket, holders_head_,
                                                               holders_tail_);
  socket.holder_ = false;
}

void RecvEngine::spend_credit(RecvSocket& socket, std::uint64_t ring_bytes, std::uint32_t bytes,
                              bool more) {
  socket.delivered_bytes_ += bytes;
  socket.peak_cqe_bytes_ = std::max(socket.peak_cqe_bytes_, bytes);
  if (!socket.holder_) return;  // dormant: its credit went back to the ring already
  std::uint64_t left = socket.credit_bytes_ - std::min(socket.credit_bytes_, ring_bytes);
  // Active again: to the back of the holders, so the front is always the longest idle one.
  return_credit(socket);
  if (more && socket.armed_limit_bytes_ > 0 && !socket.pause_cancel_) {
    // Whole buffers partly filled cost more ring than bytes: when what is left no longer covers
    // what the recv may still take, lend the difference, or end the recv and queue it again.
    const std::uint64_t limit_left =
        socket.armed_limit_bytes_ -
        std::min<std::uint64_t>(socket.armed_limit_bytes_, socket.delivered_bytes_);
    const std::uint64_t need = worst_ring_bytes(limit_left);
    if (left < need) {
      if (spare_credit() >= need) {
        left = need;
      } else {
        counters_.credit_cancels.add();
        end_recv(socket);
      }
    }
  }
  take_credit(socket, left);
}

void RecvEngine::submit_cancel(const RecvSocket& socket) {
  // Only a failed cancel posts a completion, and nobody waits for that: the recv's own final
  // completion is what tells the socket its recv ended.
  io_uring_sqe* sqe = ring_.sqe();
  io_uring_prep_cancel64(sqe, socket.user_data_, 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(sqe, kIgnoredUserData);
}

void RecvEngine::end_recv(RecvSocket& socket) {
  // Its -ECANCELED end leaves the socket open: idle if paused, else re-armed through the credit
  // FIFO (see the -ECANCELED case of handle()).
  socket.pause_cancel_ = true;
  submit_cancel(socket);
}

void RecvEngine::shrink_if_small(RecvSocket& socket) {
  // Sockets wait for credit while this recv holds a limit sized for messages far larger than the
  // ones it gets: end it, so it comes back with a limit its messages need (resize_want) and the
  // credit goes to the waiting sockets. Once per socket and size change, and only when contended.
  if (parked_head_ == nullptr || socket.pause_cancel_ || socket.armed_limit_bytes_ == 0) return;
  const std::uint64_t fits = std::bit_ceil(std::uint64_t{socket.peak_cqe_bytes_} * 2);
  const std::uint64_t smaller = std::max<std::uint64_t>(fits, limits_.min_bytes);
  if (smaller * 4 > socket.armed_limit_bytes_) return;
  counters_.credit_shrinks.add();
  end_recv(socket);
}

void RecvEngine::resize_want(RecvSocket& socket) {
  if (!capped() || socket.delivered_bytes_ == 0) return;  // nothing learnt from this recv
  // Twice the largest completion, so a recv that a message filled (or that reached its limit)
  // doubles and one of small messages shrinks to the floor; a stream may go past the cap.
  const std::uint64_t twice = std::uint64_t{socket.peak_cqe_bytes_} * 2;
  std::uint64_t want = std::bit_ceil(std::max<std::uint64_t>(twice, 1));
  want = std::clamp<std::uint64_t>(want, limits_.min_bytes, limits_.socket_cap_bytes);
  want = std::max<std::uint64_t>(want, stream_limit(socket));
  socket.want_bytes_ = static_cast<std::uint32_t>(want);
}

std::uint32_t RecvEngine::stream_limit(const RecvSocket& socket) const {
  // The recv took its whole limit and the socket still held bytes: the sender is ahead of us, and
  // each recv that ends at the limit costs a re-arm and a send of that size on the way out (on
  // loopback, 64 KiB recvs cost a stream 1.6x the CPU per byte of 256 KiB ones). Twice the limit,
  // up to what the consumer lets one recv hold (a proxy's high-water mark: a stream whose recv
  // and batch in flight cross it pauses for a moment, which still costs less than recvs of half
  // the mark) and a quarter of the ring.
  const std::uint32_t own = socket.recv_cap_bytes_;
  if (!limits_.grow_streams || own == 0 || !socket.queued_after_ ||
      socket.armed_limit_bytes_ == 0 || socket.delivered_bytes_ < socket.armed_limit_bytes_) {
    return 0;
  }
  const std::uint64_t quarter_ring = buffers_.total_bytes() / 4;
  const std::uint64_t top = std::min<std::uint64_t>(own, quarter_ring);
  if (top <= limits_.socket_cap_bytes) return 0;  // no room above the cap: the usual rule
  const std::uint64_t twice = std::uint64_t{socket.armed_limit_bytes_} * 2;
  return static_cast<std::uint32_t>(std::min(twice, top));
}

std::uint32_t RecvEngine::waiting_want(const RecvSocket& socket) const {
  // A stream that must wait for credit halves its limit: streams that share a ring settle at
  // limits that fit it together, where falling back to the cap would cost each several recvs of
  // climbing back (four streams on one 4 MiB ring: 245 KB per recv against 523 KB halved). Never
  // more than the ring less what other recvs hold: that credit may come back only by dormancy,
  // and the socket would hold the sockets queued behind it until then.
  const std::uint32_t cap = limits_.socket_cap_bytes;
  if (socket.want_bytes_ <= cap) return socket.want_bytes_;
  const std::uint64_t ring = buffers_.total_bytes();
  const std::uint64_t obtainable = std::bit_floor(ring - std::min(ring, lent_));
  const std::uint64_t half = std::min<std::uint64_t>(socket.want_bytes_ / 2, obtainable);
  return static_cast<std::uint32_t>(std::max<std::uint64_t>(half, cap));
}

std::chrono::steady_clock::time_point RecvEngine::now() const {
  if (!in_turn_) return std::chrono::steady_clock::now();
  if (!turn_now_read_) {
    turn_now_ = std::chrono::steady_clock::now();
    turn_now_read_ = true;
  }
  return turn_now_;
}

void RecvEngine::end_turn() {
  if (has_quiet()) check_quiet(now());
  if (parked_head_ != nullptr) tick(now());
  in_turn_ = false;
}

void RecvEngine::tick(std::chrono::steady_clock::time_point now) {
  if (!capped() || parked_head_ == nullptr) return;
  // Only a socket that waited as long as an idle recv must have been idle takes credit from
  // idle recvs: under load credit turns over in far less, and a recv waiting for its response
  // should keep what it was lent.
  if (now - parked_head_->parked_at_ < limits_.dormant_after) return;
  while (holders_head_ != nullptr && now - holders_head_->active_at_ >= limits_.dormant_after) {
    // Its recv stays armed; if data comes after all, it takes ring bytes no one lent it.
    return_credit(*holders_head_);
  }
  wake_parked();
}

void RecvEngine::rearm_or_park(RecvSocket& socket) {
  if (!capped()) {
    if (buffers_.free_buffers() == 0) {
      park(socket);  // re-arming now would only earn an -ENOBUFS completion
      return;
    }
    counters_.rearms.add();
    arm(socket);
    return;
  }
  // Behind the sockets already waiting (FIFO), and only with credit: a recv armed without it
  // could find the ring dry.
  if (parked_head_ != nullptr || !credit_available(socket)) {
    park(socket);
    wake_parked();
    return;
  }
  counters_.rearms.add();
  arm(socket);
}

std::uint32_t RecvEngine::recv_limit(const RecvSocket& socket) const {
  const std::uint32_t engine_cap = capped() ? next_limit_bytes(socket) : 0;
  const std::uint32_t socket_cap = socket.recv_cap_bytes_;
  if (engine_cap == 0 || socket_cap == 0) return std::max(engine_cap, socket_cap);
  return std::min(engine_cap, socket_cap);
}

void RecvEngine::arm(RecvSocket& socket) {
  assert(!socket.outstanding_);
  if (socket.outstanding_) return;  // one recv per socket, whatever a caller asks for
  io_uring_sqe* sqe = ring_.sqe();
  std::uint32_t cap = recv_limit(socket);
  if (capped()) {
    // Less spare than the socket's limit (but at least its floor: the caller checked).
    const std::uint64_t spare = spare_credit();
    if (worst_ring_bytes(cap) > spare)
      cap = static_cast<std::uint32_t>(std::max<std::uint64_t>(spare, 1));
  }
  socket.armed_limit_bytes_ = cap;
  socket.delivered_bytes_ = 0;
  socket.peak_cqe_bytes_ = 0;
  if (capped()) take_credit(socket, worst_ring_bytes(cap));
  // A single-shot bundle retries while more is queued and appends past its length (the
  // kernel's IORING_RECV_RETRY): a socket with its own limit gets one buffer per recv there.
  const bool bundle = modes_.bundle && (modes_.multishot || socket.recv_cap_bytes_ == 0);
  if (modes_.multishot) {
    io_uring_prep_recv_multishot(sqe, socket.fd_, nullptr, 0, 0);
    // The multishot total limit (sqe->optlen, which shares its word with file_index; 6.17+): the
    // recv ends, without IORING_CQE_F_MORE, once it delivered `cap` bytes. 0: no limit.
    if (!total_cap_refused_) sqe->file_index = cap;
  } else {
    // A bundle takes as many buffers as the data needs, up to the cap; a single recv at most
    // one buffer.
    const std::uint32_t one =
        cap > 0 ? std::min(cap, buffers_.buffer_bytes()) : buffers_.buffer_bytes();
    io_uring_prep_recv(sqe, socket.fd_, nullptr, bundle ? cap : one, 0);
  }
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = buffers_.group_id();
  if (bundle) sqe->ioprio |= IORING_RECVSEND_BUNDLE;
  io_uring_sqe_set_data64(sqe, socket.user_data_);
  socket.outstanding_ = true;
  socket.armed_at_added_ = buffers_.buffers_added();
  ++socket.submitted_;
  socket.state_ = RecvSocket::State::armed;
}

RecvEvent RecvEngine::handle(RecvSocket& socket, const io_uring_cqe& cqe) {
  counters_.cqes.add();
  if (socket.quiet_) unlist_quiet(socket);  // the recv is alive (this one may list it again)
  const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
  if (!more && socket.outstanding_) {
    socket.outstanding_ = false;
    ++socket.ended_;
  }
  RecvEvent event;
  const bool gave_back = take_buffers(socket, cqe, more, event);
  if (cqe.res > 0) {
    deliver_data(socket, cqe.res, event);
    // Normal with bundles when the recv emptied the ring, and after every single-shot recv.
    if (!more) {
      after_recv_ended(socket);
    } else {
      note_drained(socket, cqe);
    }
    if (gave_back) wake_parked();
    return event;
  }
  if (more) return event;  // a live multishot recv reported nothing: nothing to do
  return end_without_data(socket, cqe.res);
}

inline bool RecvEngine::take_buffers(RecvSocket& socket, const io_uring_cqe& cqe, bool more,
                                     RecvEvent& event) {
  spans_.clear();
  // A negative result never committed a buffer (io_kbuf_commit ignores negative lengths).
  if ((cqe.flags & IORING_CQE_F_BUFFER) == 0 || cqe.res < 0) {
    if (cqe.res > 0) counters_.protocol_errors.add();  // the SQE lost IOSQE_BUFFER_SELECT
    return false;
  }
  auto bid = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
  BufferRing::Consumed c = buffers_.consume(bid, static_cast<std::uint32_t>(cqe.res), modes_.bundle,
                                            (cqe.flags & IORING_CQE_F_BUF_MORE) != 0, spans_);
  if (c.status != BufferRing::ConsumeStatus::ok) counters_.protocol_errors.add();
  event.buffers = c.buffers;
  socket.queued_after_ = (cqe.flags & IORING_CQE_F_SOCK_NONEMPTY) != 0;
  if (capped()) {
    spend_credit(socket, c.ring_bytes, static_cast<std::uint32_t>(cqe.res), more);
    if (more) shrink_if_small(socket);
  }
  if (recv_limit(socket) > 0 && modes_.multishot && !total_cap_refused_) total_cap_seen_ = true;
  return c.given_back > 0;
}

inline void RecvEngine::deliver_data(RecvSocket& socket, int res, RecvEvent& event) {
  counters_.recv_bytes.add(spans_.bytes());
  counters_.buffers_per_cqe.observe(event.buffers);
  counters_.bytes_per_cqe.observe(res);
  if (spans_.size() > 2) counters_.multi_span_cqes.add();
  if (socket.state_ == RecvSocket::State::closing) {
    buffers_.release(spans_.view());  // nobody wants bytes that arrive after close()
    return;
  }
  event.kind = RecvEvent::Kind::data;
  event.spans = spans_.view();
  event.bytes = static_cast<std::uint32_t>(spans_.bytes());
}

inline RecvEvent RecvEngine::end_without_data(RecvSocket& socket, int res) {
  // The recv ended: its unused credit goes to the sockets waiting for it first (FIFO), this one
  // queues behind them if it wants to receive again.
  resize_want(socket);
  return_credit(socket);
  wake_parked();
  const bool closing = socket.state_ == RecvSocket::State::closing;
  RecvEvent event;
  switch (res) {
    case -ENOBUFS:
      counters_.enobufs.add();
      if (closing) return finish(socket, RecvEvent::Kind::canceled, 0);
      if (socket.paused_) {
        socket.state_ = RecvSocket::State::idle;
        return event;
      }
      event.kind = retry_or_park_without_buffers(socket);
      return event;
    case -EINTR:
    case -EAGAIN:
      if (closing) return finish(socket, RecvEvent::Kind::canceled, 0);
      if (socket.paused_) {
        socket.state_ = RecvSocket::State::idle;
        return event;
      }
      rearm_or_park(socket);
      return event;
    case -EINVAL:
      // Kernels before the multishot total limit (IORING_RECV_MSHOT_LIM, 6.17) refuse a non-zero
      // optlen: from then on the cap only gates arming (a recv may take more than its credit).
      if (!closing && !socket.paused_ && recv_limit(socket) > 0 && modes_.multishot &&
          !total_cap_refused_ && !total_cap_seen_) {
        total_cap_refused_ = true;
        rearm_or_park(socket);
        return event;
      }
      counters_.errors.add();
      return finish(socket, RecvEvent::Kind::error, res);
    case 0:
      counters_.eofs.add();
      return finish(socket, RecvEvent::Kind::eof, 0);
    case -ECANCELED:
      if (!closing && socket.pause_cancel_) {
        // pause()'s cancel, not close(): the socket stays open, idle until resume().
        socket.pause_cancel_ = false;
        socket.state_ = RecvSocket::State::idle;
        if (!socket.paused_) resume(socket);
        return event;
      }
      return finish(socket, RecvEvent::Kind::canceled, 0);
    default:
      counters_.errors.add();
      return finish(socket, RecvEvent::Kind::error, res);
  }
}

inline RecvEvent::Kind RecvEngine::retry_or_park_without_buffers(RecvSocket& socket) {
  if (capped()) {
    // Credit never lends more than the ring holds, so this took a recv that went dormant
    // and then received: wait behind the others for credit (no spin: credit needs bytes).
    rearm_or_park(socket);
    return socket.state_ == RecvSocket::State::parked ? RecvEvent::Kind::parked
                                                      : RecvEvent::Kind::none;
  }
  // The data waits in the socket (TCP backpressure) until release() gives buffers back.
  // Only buffers that came back after this recv was armed justify an immediate retry (they
  // may have been released while the completion sat in the queue); without that rule a
  // stale count could re-arm into -ENOBUFS again and again.
  if (buffers_.free_buffers() > 0 && buffers_.buffers_added() != socket.armed_at_added_) {
    counters_.rearms.add();
    arm(socket);
    return RecvEvent::Kind::none;
  }
  park(socket);
  return RecvEvent::Kind::parked;
}

void RecvEngine::after_recv_ended(RecvSocket& socket) {
  resize_want(socket);
  return_credit(socket);
  wake_parked();
  if (socket.state_ == RecvSocket::State::closing) {
    // The recv ended on its own before the cancel reached it; the cancel will find nothing.
    socket.state_ = RecvSocket::State::closed;
    return;
  }
  if (socket.state_ != RecvSocket::State::armed) return;
  // A cancel pause() or the credit sent will find nothing: the recv ended by itself first (and
  // the cancel runs before any re-arm submitted after it).
  socket.pause_cancel_ = false;
  if (socket.paused_) {
    socket.state_ = RecvSocket::State::idle;
    return;
  }
  rearm_or_park(socket);
}

void RecvEngine::note_drained(RecvSocket& socket, const io_uring_cqe& cqe) {
  // A completion that left bytes queued is retried by the kernel itself; a drained one waits for
  // a wakeup. Listing costs a few pointer writes (the turn's time, see begin_turn()), no syscall.
  if (!limits_.check_drained || !modes_.multishot ||
      (cqe.flags & IORING_CQE_F_SOCK_NONEMPTY) != 0 ||
      static_cast<std::uint32_t>(cqe.res) < limits_.quiet_min_bytes ||
      socket.state_ != RecvSocket::State::armed) {
    return;
  }
  socket.quiet_ = true;
  socket.quiet_since_ = now();
  push_back<&RecvSocket::quiet_prev_, &RecvSocket::quiet_next_>(socket, quiet_head_, quiet_tail_);
}

bool RecvEngine::bytes_waiting(const RecvSocket& socket) const {
  pollfd p{.fd = socket.fd_, .events = POLLIN | POLLRDHUP, .revents = 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

void RecvEngine::unlist_quiet(RecvSocket& socket) {
  unlink<&RecvSocket::quiet_prev_, &RecvSocket::quiet_next_>(socket, quiet_head_, quiet_tail_);
  socket.quiet_ = false;
}

void RecvEngine::check_quiet(std::chrono::steady_clock::time_point now) {
  while (quiet_head_ != nullptr && now - quiet_head_->quiet_since_ >= limits_.quiet_check_after) {
    RecvSocket& socket = *quiet_head_;
    unlist_quiet(socket);
    if (socket.state_ != RecvSocket::State::armed || socket.pause_cancel_ || socket.paused_ ||
        !bytes_waiting(socket)) {
      continue;  // the usual case: nothing came, and the recv waits for its next wakeup
    }
    // Bytes wait and no completion came for them: the wakeup was lost. End the recv; its
    // -ECANCELED end arms it again through the credit FIFO, like a credit cancel.
    counters_.drain_rearms.add();
    end_recv(socket);
  }
}

RecvEvent RecvEngine::finish(RecvSocket& socket, RecvEvent::Kind kind, int error) {
  return_credit(socket);
  if (socket.state_ == RecvSocket::State::parked) unpark(socket);
  socket.state_ = RecvSocket::State::closed;
  RecvEvent event;
  event.kind = kind;
  event.error = error;
  return event;
}

void RecvEngine::release(std::span<const iovec> spans) {
  if (buffers_.release(spans) > 0) wake_parked();
}

bool RecvEngine::close(RecvSocket& socket) {
  if (socket.quiet_) unlist_quiet(socket);
  switch (socket.state_) {
    case RecvSocket::State::idle:
    case RecvSocket::State::closed:
      socket.state_ = RecvSocket::State::closed;
      return true;
    case RecvSocket::State::parked:
      unpark(socket);
      socket.state_ = RecvSocket::State::closed;
      return true;
    case RecvSocket::State::closing:
      return false;
    case RecvSocket::State::armed:
      break;
  }
  socket.state_ = RecvSocket::State::closing;
  submit_cancel(socket);
  return false;
}

void RecvEngine::pause(RecvSocket& socket) {
  if (socket.paused_) return;
  socket.paused_ = true;
  if (socket.state_ == RecvSocket::State::parked) {
    unpark(socket);
    socket.state_ = RecvSocket::State::idle;
    return;
  }
  if (socket.state_ != RecvSocket::State::armed || !socket.outstanding_ || socket.pause_cancel_) {
    return;
  }
  end_recv(socket);
}

void RecvEngine::resume(RecvSocket& socket) {
  socket.paused_ = false;
  // Still armed: the recv runs on (or pause()'s cancel is on its way and re-arms when it lands).
  if (socket.state_ != RecvSocket::State::idle || !socket.started_) return;
  rearm_or_park(socket);
}

void RecvEngine::park(RecvSocket& socket) {
  counters_.parks.add();
  if (capped()) {
    socket.parked_at_ = now();
    socket.want_bytes_ = waiting_want(socket);
  }
  socket.state_ = RecvSocket::State::parked;
  push_back<&RecvSocket::parked_prev_, &RecvSocket::parked_next_>(socket, parked_head_,
                                                                  parked_tail_);
  ++parked_count_;
}

void RecvEngine::unpark(RecvSocket& socket) {
  unlink<&RecvSocket::parked_prev_, &RecvSocket::parked_next_>(socket, parked_head_, parked_tail_);
  --parked_count_;
}

void RecvEngine::wake_parked() {
  if (capped()) {
    while (parked_head_ != nullptr && credit_available(*parked_head_)) {
      RecvSocket& socket = *parked_head_;
      unpark(socket);
      counters_.rearms.add();
      arm(socket);
    }
    return;
  }
  std::uint32_t budget = buffers_.free_buffers();
  while (parked_head_ != nullptr && budget > 0) {
    RecvSocket& socket = *parked_head_;
    unpark(socket);
    counters_.rearms.add();
    arm(socket);
    --budget;
  }
}

}  // namespace ferry::uring
