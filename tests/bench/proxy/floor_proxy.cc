// floor-proxy: the least a TCP proxy can do per byte and per request on this kernel, as the
// reference the proxy benchmark measures ferry's own work against (as the AF_XDP bench measures
// the UDP path against a minimal AF_XDP forwarder). It forwards 127.0.0.1:PORT to one backend and
// does nothing else: no config, no balancing, no timers, no counters, no header, no limits.
//
//   --mode uring   one io_uring per thread (SINGLE_ISSUER | DEFER_TASKRUN), multishot accept,
//                  multishot recv into one provided-buffer ring per thread, each recv's buffers
//                  sent on as one send (one buffer) or sendmsg of their iovecs (MSG_WAITALL) and
//                  returned when it ends. --fixed-files: recvs and sends name each socket by its
//                  slot in the ring's registered file table (registered at connect, one syscall
//                  per socket), so no request takes the fd table's reference.
//   --mode epoll   one edge-triggered epoll per thread, both sockets registered once for
//                  reading and writing, one 16 KiB buffer per direction, read then write; an
//                  event moves only the direction it concerns.
//
// Each thread has its own SO_REUSEPORT listener; prints "port N" once all listen.
#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/bench_server.hh"

namespace {

using ferry_bench::g_stop;

// As ferry_bench::die(), with the error given rather than read from errno: io_uring returns it
// as -rc.
[[noreturn]] void die(const char* what, int err) {
  std::fprintf(stderr, "floor-proxy: %s: %s\n", what, std::strerror(err));
  std::exit(1);
}

void usage() {
  std::fprintf(stderr,
               "usage: floor-proxy --backend PORT [--port N] [--threads 1] [--mode uring|epoll] "
               "[--buffers 1024] [--fixed-files]\n");
  std::exit(2);
}

constexpr std::size_t kBufferBytes = 16 * 1024;
constexpr int kMaxIov = 32;

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

int listen_reuseport(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket", errno);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
  const sockaddr_in addr = loopback(port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) die("bind", errno);
  if (::listen(fd, 4096) != 0) die("listen", errno);
  return fd;
}

int bound_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// A fresh Conn in a free slot of `conns`, by id. A Conn never moves: requests in flight point
// into it.
template <class Conn>
std::uint32_t take_slot(std::vector<std::unique_ptr<Conn>>& conns,
                        std::vector<std::uint32_t>& free) {
  if (free.empty()) {
    conns.push_back(std::make_unique<Conn>());
    return static_cast<std::uint32_t>(conns.size() - 1);
  }
  const std::uint32_t id = free.back();
  free.pop_back();
  *conns[id] = Conn{};
  return id;
}

// Names a pair's sockets and its two directions: 0 client to backend, 1 backend to client.
template <class Conn>
void join(Conn& c, int cfd, int bfd) {
  c.cfd = cfd;
  c.bfd = bfd;
  c.dir[0].src = cfd;
  c.dir[0].dst = bfd;
  c.dir[1].src = bfd;
  c.dir[1].dst = cfd;
}

// Closes a pair's sockets and frees its slot for take_slot().
template <class Conn>
void release(std::vector<std::unique_ptr<Conn>>& conns, std::vector<std::uint32_t>& free,
             std::uint32_t id) {
  Conn& c = *conns[id];
  ::close(c.cfd);
  ::close(c.bfd);
  c.cfd = c.bfd = -1;
  free.push_back(id);
}

// ---------------------------------------------------------------------------------------------
// io_uring

class UringLoop {
 public:
  UringLoop(int listener, int backend_port, unsigned buffers, bool fixed_files)
      : listener_(listener),
        backend_(loopback(backend_port)),
        buffer_count_(buffers),
        fixed_files_(fixed_files) {}

  void run() {
    io_uring_params p{};
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
    p.cq_entries = 16384;
    int rc = io_uring_queue_init_params(1024, &ring_, &p);
    if (rc < 0) die("io_uring_queue_init_params", -rc);
    setup_buffers();
    if (fixed_files_) {
      // A socket's slot is its fd, so the table covers every fd the process may have.
      rlimit nofile{};
      ::getrlimit(RLIMIT_NOFILE, &nofile);
      const auto slots = static_cast<unsigned>(std::min<rlim_t>(nofile.rlim_cur, 65536));
      rc = io_uring_register_files_sparse(&ring_, slots);
      if (rc < 0) die("io_uring_register_files_sparse", -rc);
    }
    arm_accept();
    while (!g_stop) {
      __kernel_timespec ts{0, 200'000'000};
      io_uring_cqe* cqe = nullptr;
      rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
      if (rc < 0 && rc != -ETIME && rc != -EINTR) die("io_uring_submit_and_wait", -rc);
      unsigned head;
      unsigned seen = 0;
      io_uring_for_each_cqe(&ring_, head, cqe) {
        handle(*cqe);
        ++seen;
      }
      io_uring_cq_advance(&ring_, seen);
      const bool buffers_back = returned_ > 0;
      if (buffers_back) {
        io_uring_buf_ring_advance(br_, static_cast<int>(returned_));
        returned_ = 0;
      }
      if (!starved_.empty()) rearm_starved(buffers_back);
    }
    io_uring_queue_exit(&ring_);
    if (starved_total_ > 0) {
      std::fprintf(stderr, "floor-proxy: %llu recvs found the buffer ring empty (ENOBUFS)\n",
                   static_cast<unsigned long long>(starved_total_));
    }
  }

 private:
  enum Op : std::uint64_t { kAccept, kConnect, kRecv, kSend, kShutdown };

  // Points `s` at `fd`: by its registered slot with --fixed-files.
  void target(io_uring_sqe* s, int fd) const {
    if (fixed_files_) s->flags |= IOSQE_FIXED_FILE;
    s->fd = fd;
  }

  struct Dir {
    int src = -1, dst = -1;
    // Received, not yet sent: a FIFO of buffer ids linked through the loop's next_.
    std::int32_t head = -1, tail = -1;
    unsigned count = 0;
    std::uint32_t sent_off = 0;  // bytes of the head buffer already sent
    unsigned in_send = 0;        // entries the send in flight covers
    bool recv_armed = false, eof = false, shut = false, starved = false;
    iovec iov[kMaxIov];
  };

  struct Conn {
    Dir dir[2];  // 0: client to backend, 1: backend to client
    int cfd = -1, bfd = -1;
    int ops = 0;  // requests in flight
    bool dead = false;
    msghdr msg[2];  // each direction's sendmsg in flight: stays put while the kernel reads it
  };

  static std::uint64_t tag(std::uint32_t conn, int dir, Op op) {
    return (static_cast<std::uint64_t>(conn) << 8) | (static_cast<std::uint64_t>(dir) << 4) | op;
  }

  io_uring_sqe* sqe() {
    io_uring_sqe* s = io_uring_get_sqe(&ring_);
    if (s == nullptr) {
      io_uring_submit(&ring_);
      s = io_uring_get_sqe(&ring_);
      if (s == nullptr) die("io_uring_get_sqe", EBUSY);
    }
    return s;
  }

  void setup_buffers() {
    const std::size_t ring_bytes = buffer_count_ * sizeof(io_uring_buf);
    void* mem =
        ::mmap(nullptr, ring_bytes, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | MAP_PRIVATE, -1, 0);
    if (mem == MAP_FAILED) die("mmap", errno);
    br_ = static_cast<io_uring_buf_ring*>(mem);
    io_uring_buf_ring_init(br_);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<std::uint64_t>(mem);
    reg.ring_entries = buffer_count_;
    reg.bgid = 0;
    const int rc = io_uring_register_buf_ring(&ring_, &reg, 0);
    if (rc < 0) die("io_uring_register_buf_ring", -rc);
    data_ = static_cast<char*>(::mmap(nullptr, buffer_count_ * kBufferBytes, PROT_READ | PROT_WRITE,
                                      MAP_ANONYMOUS | MAP_PRIVATE, -1, 0));
    if (data_ == MAP_FAILED) die("mmap", errno);
    for (unsigned i = 0; i < buffer_count_; ++i) give_back(static_cast<std::uint16_t>(i));
    io_uring_buf_ring_advance(br_, static_cast<int>(returned_));
    returned_ = 0;
    next_.assign(buffer_count_, -1);
    len_.assign(buffer_count_, 0);
  }

  // The head buffer is sent: back to the ring.
  void pop(Dir& dir) {
    const std::int32_t bid = dir.head;
    dir.head = next_[bid];
    if (dir.head < 0) dir.tail = -1;
    --dir.count;
    give_back(static_cast<std::uint16_t>(bid));
  }

  void give_back(std::uint16_t bid) {
    io_uring_buf_ring_add(br_, data_ + bid * kBufferBytes, kBufferBytes, bid,
                          io_uring_buf_ring_mask(buffer_count_), static_cast<int>(returned_));
    ++returned_;
  }

  void arm_accept() {
    io_uring_sqe* s = sqe();
    io_uring_prep_multishot_accept(s, listener_, nullptr, nullptr, SOCK_CLOEXEC);
    io_uring_sqe_set_data64(s, tag(0, 0, kAccept));
  }

  void arm_recv(std::uint32_t id, int d) {
    Dir& dir = conns_[id]->dir[d];
    io_uring_sqe* s = sqe();
    io_uring_prep_recv_multishot(s, dir.src, nullptr, 0, 0);
    target(s, dir.src);
    s->flags |= IOSQE_BUFFER_SELECT;
    s->buf_group = 0;
    io_uring_sqe_set_data64(s, tag(id, d, kRecv));
    dir.recv_armed = true;
    ++conns_[id]->ops;
  }

  void send_pending(std::uint32_t id, int d) {
    Dir& dir = conns_[id]->dir[d];
    if (dir.in_send > 0 || dir.count == 0) return;
    const unsigned n = dir.count < kMaxIov ? dir.count : kMaxIov;
    std::int32_t bid = dir.head;
    for (unsigned i = 0; i < n; ++i, bid = next_[bid]) {
      const std::uint32_t off = i == 0 ? dir.sent_off : 0;
      dir.iov[i].iov_base = data_ + static_cast<std::size_t>(bid) * kBufferBytes + off;
      dir.iov[i].iov_len = len_[bid] - off;
    }
    io_uring_sqe* s = sqe();
    if (n == 1) {
      io_uring_prep_send(s, dir.dst, dir.iov[0].iov_base, dir.iov[0].iov_len,
                         MSG_WAITALL | MSG_NOSIGNAL);
    } else {
      msghdr& m = conns_[id]->msg[d];
      m = msghdr{};
      m.msg_iov = dir.iov;
      m.msg_iovlen = n;
      io_uring_prep_sendmsg(s, dir.dst, &m, MSG_WAITALL | MSG_NOSIGNAL);
    }
    target(s, dir.dst);
    io_uring_sqe_set_data64(s, tag(id, d, kSend));
    dir.in_send = n;
    ++conns_[id]->ops;
  }

  std::uint32_t new_conn(int cfd) {
    const std::uint32_t id = take_slot(conns_, free_);
    const int bfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (bfd < 0) die("socket", errno);
    set_nodelay(cfd);
    set_nodelay(bfd);
    join(*conns_[id], cfd, bfd);
    return id;
  }

  void handle(const io_uring_cqe& cqe) {
    const std::uint64_t t = cqe.user_data;
    const auto op = static_cast<Op>(t & 15);
    const int d = static_cast<int>((t >> 4) & 15);
    const auto id = static_cast<std::uint32_t>(t >> 8);
    switch (op) {
      case kAccept: {
        if (cqe.res >= 0) {
          const std::uint32_t cid = new_conn(cqe.res);
          io_uring_sqe* s = sqe();
          io_uring_prep_connect(s, conns_[cid]->bfd, reinterpret_cast<const sockaddr*>(&backend_),
                                sizeof(backend_));
          io_uring_sqe_set_data64(s, tag(cid, 0, kConnect));
          ++conns_[cid]->ops;
        }
        if ((cqe.flags & IORING_CQE_F_MORE) == 0) arm_accept();
        return;
      }
      case kConnect: {
        Conn& c = *conns_[id];
        --c.ops;
        if (cqe.res < 0) {
          kill(id);
          maybe_free(id);
        } else {
          if (fixed_files_) register_pair(c, true);
          arm_recv(id, 0);
          arm_recv(id, 1);
        }
        return;
      }
      case kRecv:
        on_recv(id, d, cqe);
        return;
      case kSend:
        on_send(id, d, cqe.res);
        return;
      case kShutdown:
        --conns_[id]->ops;
        maybe_free(id);
        return;
    }
  }

  void on_recv(std::uint32_t id, int d, const io_uring_cqe& cqe) {
    Conn& c = *conns_[id];
    Dir& dir = c.dir[d];
    const bool more = (cqe.flags & IORING_CQE_F_MORE) != 0;
    if (!more) {
      dir.recv_armed = false;
      --c.ops;
    }
    if (cqe.res > 0) {
      const auto bid = static_cast<std::uint16_t>(cqe.flags >> IORING_CQE_BUFFER_SHIFT);
      if (c.dead) {
        give_back(bid);
      } else {
        len_[bid] = static_cast<std::uint32_t>(cqe.res);
        next_[bid] = -1;
        if (dir.tail >= 0) {
          next_[dir.tail] = bid;
        } else {
          dir.head = bid;
        }
        dir.tail = bid;
        ++dir.count;
        send_pending(id, d);
      }
      if (!more && !c.dead) arm_recv(id, d);
    } else if (cqe.res == -ENOBUFS && !c.dead) {
      dir.starved = true;
      starved_.emplace_back(id, d);
      ++starved_total_;
    } else if (cqe.res == 0 && !c.dead) {
      if (!more) {
        dir.eof = true;
        finish_direction(id, d);
      }
    } else if (!more && !c.dead) {
      kill(id);
    }
    maybe_free(id);
  }

  void on_send(std::uint32_t id, int d, int res) {
    Conn& c = *conns_[id];
    Dir& dir = c.dir[d];
    --c.ops;
    const unsigned covered = dir.in_send;
    dir.in_send = 0;
    if (res < 0 || c.dead) {
      if (!c.dead) kill(id);
      maybe_free(id);
      return;
    }
    auto left = static_cast<std::uint32_t>(res);
    for (unsigned i = 0; i < covered && dir.count > 0; ++i) {
      const std::uint32_t rest = len_[dir.head] - dir.sent_off;
      if (left < rest) {
        dir.sent_off += left;
        break;
      }
      left -= rest;
      dir.sent_off = 0;
      pop(dir);
    }
    send_pending(id, d);
    if (dir.eof) finish_direction(id, d);
  }

  // The source ended: once its bytes are all sent, the destination gets the FIN.
  void finish_direction(std::uint32_t id, int d) {
    Conn& c = *conns_[id];
    Dir& dir = c.dir[d];
    if (dir.shut || dir.count > 0 || dir.in_send > 0) return;
    dir.shut = true;
    io_uring_sqe* s = sqe();
    io_uring_prep_shutdown(s, dir.dst, SHUT_WR);
    target(s, dir.dst);
    io_uring_sqe_set_data64(s, tag(id, d, kShutdown));
    ++c.ops;
    if (c.dir[0].shut && c.dir[1].shut) c.dead = true;
  }

  void kill(std::uint32_t id) {
    Conn& c = *conns_[id];
    c.dead = true;
    // Ends the multishot recvs and any send still waiting: they complete, and then the fds go.
    ::shutdown(c.cfd, SHUT_RDWR);
    ::shutdown(c.bfd, SHUT_RDWR);
  }

  void maybe_free(std::uint32_t id) {
    Conn& c = *conns_[id];
    // A direction still on starved_ keeps its Conn: rearm_starved() must not find the id reused.
    if (!c.dead || c.ops > 0 || c.cfd < 0 || c.dir[0].starved || c.dir[1].starved) return;
    for (Dir& dir : c.dir) {
      while (dir.count > 0) pop(dir);
    }
    if (fixed_files_) register_pair(c, false);
    release(conns_, free_, id);
  }

  // --fixed-files: the pair's sockets take their slots (a socket's slot is its fd), or leave them.
  void register_pair(const Conn& c, bool take) {
    for (const int fd : {c.cfd, c.bfd}) {
      const int value = take ? fd : -1;
      const int rc = io_uring_register_files_update(&ring_, static_cast<unsigned>(fd), &value, 1);
      if (rc < 0 && take) die("io_uring_register_files_update", -rc);
    }
  }

  // Recvs that found the ring empty start again once buffers came back; a pair that died while
  // waiting is freed now.
  void rearm_starved(bool buffers_back) {
    std::vector<std::pair<std::uint32_t, int>> todo;
    todo.swap(starved_);
    for (const auto& [id, d] : todo) {
      Conn& c = *conns_[id];
      if (!buffers_back && !c.dead) {
        starved_.emplace_back(id, d);
        continue;
      }
      c.dir[d].starved = false;
      if (!c.dead && !c.dir[d].recv_armed && !c.dir[d].eof) arm_recv(id, d);
      maybe_free(id);
    }
  }

  int listener_;
  sockaddr_in backend_;
  unsigned buffer_count_;
  bool fixed_files_;
  io_uring ring_{};
  io_uring_buf_ring* br_ = nullptr;
  char* data_ = nullptr;
  std::vector<std::int32_t> next_;  // by buffer id: the next one in its direction's FIFO
  std::vector<std::uint32_t> len_;  // by buffer id: the bytes received into it
  unsigned returned_ = 0;
  std::vector<std::unique_ptr<Conn>> conns_;  // by id; a Conn never moves
  std::vector<std::uint32_t> free_;
  std::vector<std::pair<std::uint32_t, int>> starved_;  // (pair id, direction)
  std::uint64_t starved_total_ = 0;  // recvs that found the ring empty, said at exit
};

// ---------------------------------------------------------------------------------------------
// epoll

class EpollLoop {
 public:
  EpollLoop(int listener, int backend_port)
      : listener_(listener), backend_(loopback(backend_port)) {}

  void run() {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die("epoll_create1", errno);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListener;
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, listener_, &ev) != 0) die("epoll_ctl", errno);
    epoll_event events[256];
    while (!g_stop) {
      const int n = ::epoll_wait(ep_, events, 256, 200);
      if (n < 0 && errno != EINTR) die("epoll_wait", errno);
      for (int i = 0; i < n; ++i) {
        if (events[i].data.u64 == kListener) {
          accept_all();
          continue;
        }
        const auto id = static_cast<std::uint32_t>(events[i].data.u64 >> 1);
        const int side = static_cast<int>(events[i].data.u64 & 1);  // 0: client, 1: backend
        Conn& c = *conns_[id];
        if (c.cfd < 0) continue;
        // Readable: the direction this socket feeds. Writable: the one it drains, if it holds
        // bytes the socket could not take before.
        if ((events[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) pump(id, side);
        const Dir& out = c.dir[side ^ 1];
        if ((events[i].events & EPOLLOUT) != 0 && !c.dead && out.sent < out.have) {
          pump(id, side ^ 1);
        }
        if (c.dead) release(conns_, free_, id);
      }
    }
    ::close(ep_);
  }

 private:
  static constexpr std::uint64_t kListener = ~0ull;

  struct Dir {
    int src = -1, dst = -1;
    std::uint32_t have = 0, sent = 0;
    bool eof = false, shut = false;
    char buf[kBufferBytes];
  };
  struct Conn {
    int cfd = -1, bfd = -1;
    bool dead = false;
    Dir dir[2];
  };

  void accept_all() {
    for (;;) {
      const int cfd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (cfd < 0) return;
      const int bfd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (bfd < 0) die("socket", errno);
      set_nodelay(cfd);
      set_nodelay(bfd);
      if (::connect(bfd, reinterpret_cast<const sockaddr*>(&backend_), sizeof(backend_)) != 0 &&
          errno != EINPROGRESS) {
        ::close(cfd);
        ::close(bfd);
        continue;
      }
      const std::uint32_t id = take_slot(conns_, free_);
      join(*conns_[id], cfd, bfd);
      for (const int side : {0, 1}) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        ev.data.u64 = (static_cast<std::uint64_t>(id) << 1) | static_cast<std::uint64_t>(side);
        ::epoll_ctl(ep_, EPOLL_CTL_ADD, side == 0 ? cfd : bfd, &ev);
      }
    }
  }

  // Moves what it can from src to dst: write what is buffered, read more when it is all out.
  void pump(std::uint32_t id, int d) {
    Conn& c = *conns_[id];
    Dir& dir = c.dir[d];
    bool drained = false;
    for (;;) {
      if (!flush(c, dir)) return;
      if (dir.eof) {
        if (!dir.shut) {
          dir.shut = true;
          ::shutdown(dir.dst, SHUT_WR);
          if (c.dir[d ^ 1].shut) c.dead = true;
        }
        return;
      }
      if (drained) return;
      const ssize_t r = ::recv(dir.src, dir.buf, sizeof(dir.buf), 0);
      if (r == 0) {
        dir.eof = true;
        continue;
      }
      if (r < 0) {
        if (errno != EAGAIN) c.dead = true;
        return;
      }
      dir.have = static_cast<std::uint32_t>(r);
      // A short read drained the socket: the next bytes raise a new edge.
      drained = static_cast<std::size_t>(r) < sizeof(dir.buf);
    }
  }

  // Writes what the direction holds; false when the destination is full or failed.
  static bool flush(Conn& c, Dir& dir) {
    while (dir.sent < dir.have) {
      const ssize_t w = ::send(dir.dst, dir.buf + dir.sent, dir.have - dir.sent, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno != EAGAIN) c.dead = true;
        return false;
      }
      dir.sent += static_cast<std::uint32_t>(w);
    }
    dir.have = dir.sent = 0;
    return true;
  }

  int listener_;
  sockaddr_in backend_;
  int ep_ = -1;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<std::uint32_t> free_;
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int backend = 0;
  int threads = 1;
  unsigned buffers = 1024;
  std::string mode = "uring";
  bool fixed_files = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (a == "--backend" && i + 1 < argc) {
      backend = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (a == "--buffers" && i + 1 < argc) {
      buffers = static_cast<unsigned>(std::atoi(argv[++i]));
    } else if (a == "--mode" && i + 1 < argc) {
      mode = argv[++i];
    } else if (a == "--fixed-files") {
      fixed_files = true;
    } else {
      usage();
    }
  }
  if (threads <= 0 || backend <= 0 || (mode != "uring" && mode != "epoll") || buffers == 0 ||
      (buffers & (buffers - 1)) != 0 || buffers > 32768) {
    usage();
  }
  ferry_bench::stop_on_signals();

  std::vector<int> listeners;
  listeners.push_back(listen_reuseport(port));
  port = bound_port(listeners[0]);
  for (int t = 1; t < threads; ++t) listeners.push_back(listen_reuseport(port));
  std::printf("port %d\n", port);
  std::fflush(stdout);

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      if (mode == "uring") {
        UringLoop(listeners[t], backend, buffers, fixed_files).run();
      } else {
        EpollLoop(listeners[t], backend).run();
      }
    });
  }
  for (auto& t : pool) t.join();
  for (const int fd : listeners) ::close(fd);
  return 0;
}
