// The receive path of one worker: per socket one recv on the shared buffer ring (bundled and
// multishot where the kernel allows), completions turned into span lists without copying, and the
// recv lifecycle: re-arm when a recv ends, park on a dry ring until buffers come back, close
// cleanly on EOF, error or cancel, never two recvs outstanding on one socket.
#include "lib/uring/recv_engine.hh"

#include <cassert>
#include <cerrno>

#include "lib/uring/uring_compat.hh"

namespace ferry::uring {

RecvEngine::RecvEngine(Uring& ring, BufferRing& buffers, const RecvModes& modes,
                       RecvCounters& counters)
    : ring_(ring), buffers_(buffers), modes_(modes), counters_(counters), spans_(buffers.count()) {
  modes_.incremental = buffers.incremental();
}

bool RecvEngine::start(RecvSocket& socket) {
  if (socket.state_ != RecvSocket::State::idle) return false;
  arm(socket);
  return true;
}

void RecvEngine::arm(RecvSocket& socket) {
  assert(!socket.outstanding_);
  if (socket.outstanding_) return;  // one recv per socket, whatever a caller asks for
  io_uring_sqe* sqe = ring_.sqe();
  if (modes_.multishot) {
    io_uring_prep_recv_multishot(sqe, socket.fd_, nullptr, 0, 0);
  } else {
    // A bundle takes as many buffers as the data needs; a single recv at most one buffer.
    io_uring_prep_recv(sqe, socket.fd_, nullptr, modes_.bundle ? 0 : buffers_.buffer_bytes(), 0);
  }
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = buffers_.group_id();
  if (modes_.bundle) sqe->ioprio |= IORING_RECVSEND_BUNDLE;
  io_uring_sqe_set_data64(sqe, socket.user_data_);
  socket.outstanding_ = true;
  socket.armed_at_added_ = buffers_.buffers_added();
  ++socket.submitted_;
  socket.state_ = RecvSocket::State::armed;
}

RecvEvent RecvEngine::handle(RecvSocket& socket, const io_uring_cqe& cqe) {
  counters_.cqes.add();
  const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
  if (!more && socket.outstanding_) {
    socket.outstanding_ = false;
    ++socket.ended_;
  }

  RecvEvent event;
  bool gave_back = false;
  spans_.clear();
  // A negative result never committed a buffer (io_kbuf_commit ignores negative lengths).
  if ((cqe.flags & IORING_CQE_F_BUFFER) != 0 && cqe.res >= 0) {
    auto bid = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
    BufferRing::Consumed c =
        buffers_.consume(bid, static_cast<std::uint32_t>(cqe.res), modes_.bundle,
                         (cqe.flags & IORING_CQE_F_BUF_MORE) != 0, spans_);
    if (c.status != BufferRing::ConsumeStatus::ok) counters_.protocol_errors.add();
    event.buffers = c.buffers;
    gave_back = c.given_back > 0;
  } else if (cqe.res > 0) {
    counters_.protocol_errors.add();  // data without a buffer: the SQE lost IOSQE_BUFFER_SELECT
  }

  if (cqe.res > 0) {
    counters_.recv_bytes.add(spans_.bytes());
    counters_.buffers_per_cqe.observe(event.buffers);
    counters_.bytes_per_cqe.observe(cqe.res);
    if (spans_.size() > 2) counters_.multi_span_cqes.add();
    if (socket.state_ == RecvSocket::State::closing) {
      buffers_.release(spans_.view());  // nobody wants bytes that arrive after close()
    } else {
      event.kind = RecvEvent::Kind::data;
      event.spans = spans_.view();
      event.bytes = static_cast<std::uint32_t>(spans_.bytes());
    }
    // Normal with bundles when the recv emptied the ring, and after every single-shot recv.
    if (!more) after_recv_ended(socket);
    if (gave_back) wake_parked();
    return event;
  }
  if (more) return event;  // a live multishot recv reported nothing: nothing to do

  const bool closing = socket.state_ == RecvSocket::State::closing;
  switch (cqe.res) {
    case -ENOBUFS:
      counters_.enobufs.add();
      if (closing) return finish(socket, RecvEvent::Kind::canceled, 0);
      // The data waits in the socket (TCP backpressure) until release() gives buffers back.
      // Only buffers that came back after this recv was armed justify an immediate retry (they
      // may have been released while the completion sat in the queue); without that rule a
      // stale count could re-arm into -ENOBUFS again and again.
      if (buffers_.free_buffers() > 0 && buffers_.buffers_added() != socket.armed_at_added_) {
        counters_.rearms.add();
        arm(socket);
        return event;
      }
      park(socket);
      event.kind = RecvEvent::Kind::parked;
      return event;
    case -EINTR:
    case -EAGAIN:
      if (closing) return finish(socket, RecvEvent::Kind::canceled, 0);
      counters_.rearms.add();
      arm(socket);
      return event;
    case 0:
      counters_.eofs.add();
      return finish(socket, RecvEvent::Kind::eof, 0);
    case -ECANCELED:
      return finish(socket, RecvEvent::Kind::canceled, 0);
    default:
      counters_.errors.add();
      return finish(socket, RecvEvent::Kind::error, cqe.res);
  }
}

void RecvEngine::after_recv_ended(RecvSocket& socket) {
  if (socket.state_ == RecvSocket::State::closing) {
    // The recv ended on its own before the cancel reached it; the cancel will find nothing.
    socket.state_ = RecvSocket::State::closed;
    return;
  }
  if (socket.state_ != RecvSocket::State::armed) return;
  if (buffers_.free_buffers() == 0) {
    park(socket);  // re-arming now would only earn an -ENOBUFS completion
    return;
  }
  counters_.rearms.add();
  arm(socket);
}

RecvEvent RecvEngine::finish(RecvSocket& socket, RecvEvent::Kind kind, int error) {
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
  io_uring_sqe* sqe = ring_.sqe();
  io_uring_prep_cancel64(sqe, socket.user_data_, 0);
  sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
  io_uring_sqe_set_data64(sqe, kIgnoredUserData);
  return false;
}

void RecvEngine::park(RecvSocket& socket) {
  counters_.parks.add();
  socket.state_ = RecvSocket::State::parked;
  socket.parked_prev_ = parked_tail_;
  socket.parked_next_ = nullptr;
  if (parked_tail_ != nullptr) {
    parked_tail_->parked_next_ = &socket;
  } else {
    parked_head_ = &socket;
  }
  parked_tail_ = &socket;
  ++parked_count_;
}

void RecvEngine::unpark(RecvSocket& socket) {
  if (socket.parked_prev_ != nullptr) {
    socket.parked_prev_->parked_next_ = socket.parked_next_;
  } else {
    parked_head_ = socket.parked_next_;
  }
  if (socket.parked_next_ != nullptr) {
    socket.parked_next_->parked_prev_ = socket.parked_prev_;
  } else {
    parked_tail_ = socket.parked_prev_;
  }
  socket.parked_prev_ = socket.parked_next_ = nullptr;
  --parked_count_;
}

void RecvEngine::wake_parked() {
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
