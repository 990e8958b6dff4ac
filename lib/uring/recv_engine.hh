// The receive path of one worker: per socket one recv on the shared buffer ring (bundled and
// multishot where the kernel allows), completions turned into span lists without copying, and the
// recv lifecycle: re-arm when a recv ends, park on a dry ring until buffers come back, close
// cleanly on EOF, error or cancel, never two recvs outstanding on one socket.
#pragma once

#include <liburing.h>
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>

#include "lib/uring/buffer_ring.hh"
#include "lib/uring/recv_counters.hh"
#include "lib/uring/recv_options.hh"
#include "lib/uring/span_list.hh"
#include "lib/uring/uring.hh"

namespace ferry::uring {

// One socket's receive state. Owned by the caller (the connection), which must keep it at a fixed
// address until state() is closed: the engine links parked sockets through it.
class RecvSocket {
 public:
  enum class State : std::uint8_t {
    idle,     // no recv yet
    armed,    // one recv outstanding
    parked,   // waiting for buffers; no recv outstanding
    closing,  // cancel sent; the final completion is still to come
    closed,   // nothing outstanding, no completion will come for it any more
  };

  // `user_data` tags this socket's recv completions; the caller routes them back to handle().
  RecvSocket(int fd, std::uint64_t user_data) : fd_(fd), user_data_(user_data) {}
  RecvSocket(const RecvSocket&) = delete;
  RecvSocket& operator=(const RecvSocket&) = delete;

  int fd() const { return fd_; }
  std::uint64_t user_data() const { return user_data_; }
  State state() const { return state_; }
  bool recv_outstanding() const { return outstanding_; }
  // Recvs submitted and recvs ended for this socket; they never differ by more than one.
  std::uint64_t recvs_submitted() const { return submitted_; }
  std::uint64_t recvs_ended() const { return ended_; }
  // At most this many bytes per recv (multishot: its total limit, then it is re-armed), below
  // the engine's RecvLimits cap when both are set; 0: the engine's limit alone. Set it before
  // start(): a consumer that pauses at a high water mark then holds at most the mark plus this.
  void set_recv_cap_bytes(std::uint32_t bytes) { recv_cap_bytes_ = bytes; }
  std::uint32_t recv_cap_bytes() const { return recv_cap_bytes_; }

 private:
  friend class RecvEngine;
  int fd_;
  std::uint64_t user_data_;
  State state_ = State::idle;
  bool outstanding_ = false;
  std::uint64_t submitted_ = 0;
  std::uint64_t ended_ = 0;
  std::uint32_t recv_cap_bytes_ = 0;
  std::uint64_t armed_at_added_ = 0;  // BufferRing::buffers_added() when the recv was submitted
  bool paused_ = false;               // pause(): do not re-arm when the recv ends
  bool pause_cancel_ = false;         // end_recv()'s cancel (pause, credit) may be on its way
  bool started_ = false;              // start() was called (its first recv may wait for credit)
  RecvSocket* parked_prev_ = nullptr;
  RecvSocket* parked_next_ = nullptr;
  // Credit (RecvLimits::socket_cap_bytes > 0): ring bytes the outstanding recv may still take,
  // and its place in the engine's list of credit holders, least recently active first.
  std::uint64_t credit_bytes_ = 0;
  std::chrono::steady_clock::time_point active_at_{};
  std::chrono::steady_clock::time_point parked_at_{};  // capped engines only
  // Adaptive credit (capped engines): what the next recv is armed with, and what the armed one
  // was armed with, delivered so far and delivered at most in one completion.
  std::uint32_t want_bytes_ = 0;  // 0: not sized yet (RecvEngine::first_want())
  std::uint32_t armed_limit_bytes_ = 0;
  std::uint64_t delivered_bytes_ = 0;
  std::uint32_t peak_cqe_bytes_ = 0;
  bool queued_after_ = false;  // the last completion said bytes were still queued (SOCK_NONEMPTY)
  RecvSocket* holder_prev_ = nullptr;
  RecvSocket* holder_next_ = nullptr;
  bool holder_ = false;
  // The last completion drained the socket and the recv goes on (RecvLimits::check_drained): the
  // engine's list of quiet recvs, oldest first, and since when.
  RecvSocket* quiet_prev_ = nullptr;
  RecvSocket* quiet_next_ = nullptr;
  bool quiet_ = false;
  std::chrono::steady_clock::time_point quiet_since_{};
};

// How much of the buffer ring the recvs of one engine may take. With socket_cap_bytes == 0 every
// recv may take the whole ring, and a dry ring ends recvs with -ENOBUFS (then they park). With a
// cap ("ring credit"), each recv is armed with the kernel's multishot total limit (single-shot:
// its length) and only while the ring's free bytes cover every armed recv's remaining limit, so
// the ring cannot run dry under them; the other sockets wait parked (no SQE) in FIFO order.
// The limit adapts per socket between min_bytes and socket_cap_bytes: twice the largest
// completion of its last recv, rounded up to a power of two. A connection of 64-byte messages
// then holds min_bytes of credit, one that receives 64 KiB responses climbs to the cap in a few
// recvs. When the first parked socket waited dormant_after, recvs that received nothing for that
// long stop counting against the ring, so idle connections never keep sockets with data waiting.
// A stream grows past the cap: a recv that took its whole limit and left bytes queued in the
// socket (IORING_CQE_F_SOCK_NONEMPTY) doubles its next limit, up to the socket's own cap
// (RecvSocket::set_recv_cap_bytes, the proxy's high-water mark) and a quarter of the ring; one
// that must wait for credit halves it (never below the cap). A response that fills its recv
// leaves nothing queued and stays at the cap.
struct RecvLimits {
  std::uint32_t socket_cap_bytes = 0;
  std::uint32_t min_bytes = 4096;  // raised to one buffer on a ring without incremental buffers
  std::chrono::milliseconds dormant_after{50};
  bool grow_streams = true;  // FERRY_URING_NO_STREAM_GROWTH=1 turns it off (ferryd)
  // A multishot recv whose completion drained the socket (no IORING_CQE_F_SOCK_NONEMPTY) waits
  // for the next wakeup. A segment that lands while the recv copies can miss it (seen on 6.18
  // with bundles: a response's last segment sat in the socket until the peer's FIN woke the recv
  // seconds later). With this set, a recv that stays quiet for quiet_check_after after such a
  // completion of at least quiet_min_bytes gets one zero-timeout poll(2) of its socket, and if
  // bytes (or an EOF) wait there, it is ended and armed again. Only a completion of several
  // segments copies long enough for the next to land meanwhile: a request of one segment never
  // costs a poll, and a connection busier than quiet_check_after never goes quiet that long.
  // FERRY_URING_NO_DRAIN_CHECK=1 turns it off (ferryd).
  bool check_drained = true;
  std::chrono::milliseconds quiet_check_after{10};
  std::uint32_t quiet_min_bytes = 4096;
};
// The default cap (tcp.buffers.recv_credit_bytes): one 64 KiB response per recv, 64 of them at
// once on a 256 x 16 KiB ring.
inline constexpr std::uint32_t kDefaultSocketCapBytes = 64 * 1024;

struct RecvEvent {
  enum class Kind : std::uint8_t {
    none,      // nothing for the consumer (e.g. data arriving after close(), already released)
    data,      // `spans` hold `bytes` received bytes
    parked,    // -ENOBUFS: the socket waits for buffers and resumes by itself after release()
    eof,       // the peer closed; state() is closed
    error,     // `error` is the negative errno; state() is closed
    canceled,  // close() took effect; state() is closed
  };
  Kind kind = Kind::none;
  // The spans stay valid until the next handle() on this engine (copy the iovecs to keep them);
  // the bytes they point at stay valid until the consumer passes them to release().
  std::span<const iovec> spans;
  std::uint32_t bytes = 0;
  std::uint32_t buffers = 0;  // ring buffers the completion touched
  int error = 0;
};

class RecvEngine {
 public:
  // `modes.incremental` is taken from `buffers` (the kernel may have refused it).
  // `limits.socket_cap_bytes` is clamped to the ring's size.
  RecvEngine(Uring& ring, BufferRing& buffers, const RecvModes& modes, RecvCounters& counters,
             const RecvLimits& limits = {});
  RecvEngine(const RecvEngine&) = delete;
  RecvEngine& operator=(const RecvEngine&) = delete;

  const RecvModes& modes() const { return modes_; }
  BufferRing& buffers() { return buffers_; }

  // Queues the socket's first recv (submitted with the caller's next submit). False when the
  // socket is not idle: a recv is already outstanding, parked or it was closed.
  bool start(RecvSocket& socket);

  // Handles one completion carrying socket.user_data(). After it, state() tells what happened to
  // the recv: still armed, re-armed, parked, or closed.
  RecvEvent handle(RecvSocket& socket, const io_uring_cqe& cqe);

  // The consumer is done with spans from earlier data events (e.g. its send completed). Buffers
  // that go back to the ring wake parked sockets (FIFO), at most one per free buffer.
  void release(std::span<const iovec> spans);
  void release(const iovec& span) { release(std::span<const iovec>(&span, 1)); }

  // Stops receiving. Returns true when the socket is closed at once (nothing outstanding); false
  // when a cancel was queued and the final completion will still arrive through handle().
  // The cancel's own completion carries kIgnoredUserData.
  bool close(RecvSocket& socket);

  // Backpressure: stop asking for data without closing. An armed recv is cancelled (whatever it
  // received before is still delivered; its -ECANCELED end leaves the socket idle), a parked one
  // leaves the parked list. resume() arms it again (or parks it when the ring is dry). Both are
  // no-ops on a socket that was never started or is closing/closed.
  void pause(RecvSocket& socket);
  void resume(RecvSocket& socket);
  bool paused(const RecvSocket& socket) const { return socket.paused_; }

  std::size_t parked_sockets() const { return parked_count_; }
  const RecvLimits& limits() const { return limits_; }
  // Ring bytes lent to outstanding recvs (<= the ring's free bytes whenever no recv went dormant).
  std::uint64_t credit_lent_bytes() const { return lent_; }
  // The limit socket's next recv is armed with (capped engines).
  std::uint32_t next_limit_bytes(const RecvSocket& socket) const;

  // Recvs that drained their socket and got no completion since (RecvLimits::check_drained). While
  // there are any, the worker parks for at most limits().quiet_check_after; check_quiet() (from
  // end_turn(), after every reap): a recv quiet that long whose socket has bytes waiting lost its
  // wakeup and is ended and armed again (ferry_uring_drain_rearms_total).
  bool has_quiet() const { return quiet_head_ != nullptr; }
  void check_quiet(std::chrono::steady_clock::time_point now);

  // With a cap and parked sockets: recvs idle for limits().dormant_after stop holding credit, and
  // parked sockets are armed with what that frees. Cheap; end_turn() calls it.
  void tick(std::chrono::steady_clock::time_point now);

  // One turn of the worker's loop, around its reap: between begin_turn() and end_turn() the
  // engine reads the clock at most once, when something first needs the time (stamping
  // activity, parking or a quiet recv; its thresholds are 10 ms and more, a turn takes
  // microseconds), and a turn that needs none reads none. Outside a turn it reads the clock each
  // time. end_turn() looks at quiet recvs (check_quiet()) and lends idle recvs' credit to parked
  // sockets (tick()) when there are any, at the turn's time.
  void begin_turn() {
    in_turn_ = true;
    turn_now_read_ = false;
  }
  void end_turn();

 private:
  std::chrono::steady_clock::time_point now() const;
  void arm(RecvSocket& socket);
  void park(RecvSocket& socket);
  void unpark(RecvSocket& socket);
  void wake_parked();
  // handle()'s steps: the buffers a completion filled (true when some went back to the ring),
  // the data event they make, and what a recv that ended without data leaves the socket in.
  bool take_buffers(RecvSocket& socket, const io_uring_cqe& cqe, bool more, RecvEvent& event);
  void deliver_data(RecvSocket& socket, int res, RecvEvent& event);
  RecvEvent end_without_data(RecvSocket& socket, int res);
  RecvEvent::Kind retry_or_park_without_buffers(RecvSocket& socket);  // after -ENOBUFS
  void after_recv_ended(RecvSocket& socket);
  void rearm_or_park(RecvSocket& socket);  // arm now, or wait (parked) for buffers or credit
  // After a data completion of a recv that goes on: list it as quiet if it drained the socket.
  void note_drained(RecvSocket& socket, const io_uring_cqe& cqe);
  bool bytes_waiting(const RecvSocket& socket) const;  // poll(2), zero timeout
  void unlist_quiet(RecvSocket& socket);
  bool capped() const { return limits_.socket_cap_bytes > 0; }
  std::uint32_t recv_limit(const RecvSocket& socket) const;  // 0: none
  bool credit_available(const RecvSocket& socket) const;
  std::uint64_t spare_credit() const;  // free ring bytes not lent, in whole buffers if need be
  void take_credit(RecvSocket& socket, std::uint64_t bytes);
  void spend_credit(RecvSocket& socket, std::uint64_t ring_bytes, std::uint32_t bytes, bool more);
  std::uint64_t worst_ring_bytes(std::uint64_t limit_left_bytes) const;
  void submit_cancel(const RecvSocket& socket);  // of its outstanding recv
  void end_recv(RecvSocket& socket);             // cancel the recv, keep the socket (pause, credit)
  void shrink_if_small(RecvSocket& socket);
  void resize_want(RecvSocket& socket);
  std::uint32_t stream_limit(const RecvSocket& socket) const;  // 0: not a stream
  std::uint32_t waiting_want(const RecvSocket& socket) const;  // its limit when it parks
  void return_credit(RecvSocket& socket);
  RecvEvent finish(RecvSocket& socket, RecvEvent::Kind kind, int error);

  Uring& ring_;
  BufferRing& buffers_;
  RecvModes modes_;
  RecvCounters& counters_;
  SpanList spans_;
  RecvSocket* parked_head_ = nullptr;
  RecvSocket* parked_tail_ = nullptr;
  std::size_t parked_count_ = 0;
  RecvLimits limits_;
  std::uint64_t lent_ = 0;  // sum of credit_bytes_ over the holders
  RecvSocket* holders_head_ = nullptr;
  RecvSocket* holders_tail_ = nullptr;
  RecvSocket* quiet_head_ = nullptr;
  RecvSocket* quiet_tail_ = nullptr;
  bool total_cap_refused_ = false;  // the kernel refused the multishot total limit (-EINVAL)
  bool total_cap_seen_ = false;     // a capped multishot recv delivered data: the limit works
  bool in_turn_ = false;
  mutable bool turn_now_read_ = false;  // turn_now_ holds this turn's time
  mutable std::chrono::steady_clock::time_point turn_now_{};
};

}  // namespace ferry::uring
