// proxy-backend: the server behind every proxy in the proxy benchmark. Epoll, one loop per thread
// on a shared listener; answers each request with as many bytes as its header asks for.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "../common/bench_server.hh"
#include "request_header.hh"

namespace {

struct Connection {
  bool open = false;
  char header[sizeof(ferry_bench::RequestHeader)];
  std::uint32_t header_have = 0;
  std::uint64_t body_left = 0;      // request filler still to skip
  std::uint64_t response_next = 0;  // owed once the current request's body is in
  std::uint64_t owed_bytes = 0;     // response bytes not yet written
};

using ferry_bench::die;
using ferry_bench::g_stop;

void usage() {
  std::fprintf(stderr, "usage: proxy-backend [--port N] [--threads 1]\n");
  std::exit(2);
}

// One thread's loop: accepts from the shared listener (EPOLLEXCLUSIVE wakes one thread per
// connection) and serves what it accepted.
class BackendLoop {
 public:
  explicit BackendLoop(int listener) : listener_(listener), response_(1 << 20, 'r') {}

  void run() {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die("epoll_create1");
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLEXCLUSIVE;
    ev.data.fd = listener_;
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, listener_, &ev) != 0) die("epoll_ctl listener");
    std::vector<char> scratch(256 * 1024);
    epoll_event events[256];
    while (!g_stop) {
      const int n = ::epoll_wait(ep_, events, 256, 200);
      if (n < 0 && errno != EINTR) die("epoll_wait");
      for (int i = 0; i < n; ++i) {
        const int fd = events[i].data.fd;
        if (fd == listener_) {
          accept_all();
          continue;
        }
        Connection& c = conns_[static_cast<std::size_t>(fd)];
        if ((events[i].events & EPOLLOUT) != 0 && flush(fd, c)) want_out(fd, false);
        if (!c.open || (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) continue;
        const ssize_t r = ::recv(fd, scratch.data(), scratch.size(), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          close_connection(fd);
          continue;
        }
        if (r < 0) continue;
        const bool was_idle = c.owed_bytes == 0;
        if (!consume(c, scratch.data(), static_cast<std::size_t>(r))) {
          std::fprintf(stderr, "proxy-backend: malformed request header, closing\n");
          close_connection(fd);
          continue;
        }
        if (was_idle && c.owed_bytes > 0 && !flush(fd, c) && c.open) want_out(fd, true);
      }
    }
    for (std::size_t fd = 0; fd < conns_.size(); ++fd) {
      if (conns_[fd].open) ::close(static_cast<int>(fd));
    }
    ::close(ep_);
  }

 private:
  void accept_all() {
    for (;;) {
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      if (static_cast<std::size_t>(fd) >= conns_.size()) conns_.resize(fd + 1024);
      conns_[static_cast<std::size_t>(fd)] = Connection{};
      conns_[static_cast<std::size_t>(fd)].open = true;
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.fd = fd;
      ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e);
    }
  }

  // Walks received bytes through header and filler; a completed request adds its response to
  // what the connection owes. False when a header is impossible.
  static bool consume(Connection& c, const char* data, std::size_t n) {
    while (n > 0) {
      if (c.body_left > 0) {
        const std::size_t take = std::min<std::uint64_t>(c.body_left, n);
        c.body_left -= take;
        data += take;
        n -= take;
        if (c.body_left == 0) c.owed_bytes += c.response_next;
        continue;
      }
      const std::size_t take = std::min<std::size_t>(sizeof(c.header) - c.header_have, n);
      std::copy(data, data + take, c.header + c.header_have);
      c.header_have += static_cast<std::uint32_t>(take);
      data += take;
      n -= take;
      if (c.header_have < sizeof(c.header)) break;
      c.header_have = 0;
      const ferry_bench::RequestHeader h = ferry_bench::read_request_header(c.header);
      if (h.request_bytes < ferry_bench::kMinRequestBytes) return false;
      c.body_left = h.request_bytes - ferry_bench::kMinRequestBytes;
      c.response_next = h.response_bytes;
      if (c.body_left == 0) c.owed_bytes += c.response_next;
    }
    return true;
  }

  // Writes what the connection owes; true when all of it went out.
  bool flush(int fd, Connection& c) {
    while (c.owed_bytes > 0) {
      const std::size_t n = std::min<std::uint64_t>(c.owed_bytes, response_.size());
      const ssize_t w = ::send(fd, response_.data(), n, MSG_NOSIGNAL);
      if (w < 0) {
        if (errno != EAGAIN) close_connection(fd);
        return false;
      }
      c.owed_bytes -= static_cast<std::uint64_t>(w);
    }
    return true;
  }

  void want_out(int fd, bool out) {
    epoll_event e{};
    e.events = EPOLLIN | (out ? EPOLLOUT : 0u);
    e.data.fd = fd;
    ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &e);
  }

  void close_connection(int fd) {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns_[static_cast<std::size_t>(fd)].open = false;
  }

  int listener_;
  int ep_ = -1;
  std::vector<char> response_;
  std::vector<Connection> conns_;  // indexed by fd
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  int threads = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else {
      usage();
    }
  }
  if (threads <= 0) usage();
  ferry_bench::stop_on_signals();
  const int listener = ferry_bench::listen_loopback(port);

  std::vector<BackendLoop> loops;
  loops.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) loops.emplace_back(listener);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { loops[t].run(); });
  loops[0].run();
  for (auto& t : pool) t.join();
  ::close(listener);
  return 0;
}
