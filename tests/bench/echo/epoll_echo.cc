// The kernel-bound reference for the echo benchmark: a minimal single-threaded epoll echo server
// (read what is there, write it back, no runtime at all). With --response-bytes N it is instead
// the sending side of the large-response benchmark: every request byte it reads is answered
// with N bytes.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "../common/bench_server.hh"

namespace {

struct Connection {
  std::vector<char> pending;  // echo: received, not yet written back
  std::size_t pending_off = 0;
  std::uint64_t owed = 0;  // response mode: bytes still to send
};

using ferry_bench::die;
using ferry_bench::g_stop;

void usage() {
  std::fprintf(stderr, "usage: epoll-echo [--port N] [--response-bytes N]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  std::uint64_t response_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--port" && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (a == "--response-bytes" && i + 1 < argc) {
      response_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else {
      usage();
    }
  }
  ferry_bench::stop_on_signals();
  int listener = ferry_bench::listen_loopback(port);

  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listener;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev);

  std::unordered_map<int, Connection> conns;
  std::vector<char> buf(256 * 1024);
  std::vector<char> response(response_bytes > 0 ? 256 * 1024 : 0, 'r');
  epoll_event events[256];

  auto close_conn = [&](int fd) {
    ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);
  };
  auto want_out = [&](int fd, bool out) {
    epoll_event e{};
    e.events = EPOLLIN | (out ? EPOLLOUT : 0u);
    e.data.fd = fd;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, fd, &e);
  };
  // Writes what the connection owes; true while the socket takes it all.
  auto flush = [&](int fd, Connection& c) -> bool {
    if (response_bytes > 0) {
      while (c.owed > 0) {
        const std::size_t n = std::min<std::uint64_t>(c.owed, response.size());
        const ssize_t w = ::send(fd, response.data(), n, MSG_NOSIGNAL);
        if (w < 0) return errno != EAGAIN && errno != EWOULDBLOCK ? (close_conn(fd), false) : false;
        c.owed -= static_cast<std::uint64_t>(w);
      }
      return true;
    }
    while (c.pending_off < c.pending.size()) {
      const ssize_t w = ::send(fd, c.pending.data() + c.pending_off,
                               c.pending.size() - c.pending_off, MSG_NOSIGNAL);
      if (w < 0) return errno != EAGAIN && errno != EWOULDBLOCK ? (close_conn(fd), false) : false;
      c.pending_off += static_cast<std::size_t>(w);
    }
    c.pending.clear();
    c.pending_off = 0;
    return true;
  };

  while (!g_stop) {
    const int n = ::epoll_wait(ep, events, 256, 200);
    if (n < 0 && errno != EINTR) die("epoll_wait");
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener) {
        for (;;) {
          int c = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.fd = c;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
          conns.emplace(c, Connection{});
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Connection& c = it->second;
      if ((events[i].events & EPOLLOUT) != 0) {
        if (flush(fd, c)) want_out(fd, false);
        if (conns.find(fd) == conns.end()) continue;
      }
      if ((events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) {
        const ssize_t r = ::recv(fd, buf.data(), buf.size(), 0);
        if (r == 0 || (r < 0 && errno != EAGAIN)) {
          close_conn(fd);
          continue;
        }
        if (r < 0) continue;
        const bool idle = response_bytes > 0 ? c.owed == 0 : c.pending.empty();
        if (response_bytes > 0) {
          c.owed += static_cast<std::uint64_t>(r) * response_bytes;
        } else {
          c.pending.insert(c.pending.end(), buf.data(), buf.data() + r);
        }
        if (idle && !flush(fd, c) && conns.find(fd) != conns.end()) want_out(fd, true);
      }
    }
  }
  for (auto& [fd, c] : conns) ::close(fd);
  ::close(listener);
  return 0;
}
