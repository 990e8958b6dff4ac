// echo-load: N connections x R rounds of request/response against an echo server on 127.0.0.1.
// Every connection keeps one request in flight (send M bytes, wait for all M back, repeat);
// reports round trips per second and the p50/p95/p99 round-trip latency.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  int connections = 1024;
  int rounds = 1000;
  std::size_t size = 64;
  int threads = 1;
  bool json = false;
};

struct Connection {
  int fd = -1;
  std::size_t sent = 0;
  std::size_t received = 0;
  int rounds_left = 0;
  Clock::time_point started;
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int connect_to(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) die("connect");
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

// One thread's share of the connections, driven by its own epoll.
void drive(const Options& o, std::vector<Connection>& conns,
           std::vector<std::uint32_t>& latencies_ns, std::atomic<long>& failures) {
  std::vector<char> message(o.size, 'e');
  std::vector<char> scratch(std::max<std::size_t>(o.size, 65536));
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  for (std::size_t i = 0; i < conns.size(); ++i) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, conns[i].fd, &e);
  }
  auto set_out = [&](std::size_t i, bool out) {
    epoll_event e{};
    e.events = EPOLLIN | (out ? EPOLLOUT : 0u);
    e.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_MOD, conns[i].fd, &e);
  };
  auto push = [&](std::size_t i) -> bool {  // true: request completely written
    Connection& c = conns[i];
    while (c.sent < o.size) {
      const ssize_t n = ::send(c.fd, message.data() + c.sent, o.size - c.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN) return false;
        failures.fetch_add(1);
        return true;
      }
      c.sent += static_cast<std::size_t>(n);
    }
    return true;
  };
  auto start = [&](std::size_t i) {
    Connection& c = conns[i];
    c.sent = 0;
    c.received = 0;
    c.started = Clock::now();
    if (!push(i)) set_out(i, true);
  };
  std::size_t active = 0;
  for (std::size_t i = 0; i < conns.size(); ++i) {
    if (conns[i].rounds_left > 0) {
      ++active;
      start(i);
    }
  }
  epoll_event events[512];
  while (active > 0) {
    const int n = ::epoll_wait(ep, events, 512, 5000);
    if (n == 0) {
      std::fprintf(stderr, "echo-load: no progress for 5 s with %zu connections active\n", active);
      failures.fetch_add(static_cast<long>(active));
      break;
    }
    for (int k = 0; k < n; ++k) {
      const std::size_t i = events[k].data.u64;
      Connection& c = conns[i];
      if ((events[k].events & EPOLLOUT) != 0 && push(i)) set_out(i, false);
      if ((events[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) continue;
      for (;;) {
        const ssize_t r = ::recv(c.fd, scratch.data(), scratch.size(), 0);
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) {
          failures.fetch_add(1);
          c.rounds_left = 0;
          --active;
          ::epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
          break;
        }
        c.received += static_cast<std::size_t>(r);
        if (c.received < o.size) continue;
        if (c.received > o.size) failures.fetch_add(1);  // the echo carried more than we sent
        latencies_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - c.started).count(),
            UINT32_MAX)));
        if (--c.rounds_left == 0) {
          --active;
          break;
        }
        start(i);
      }
    }
  }
  ::close(ep);
}

double percentile_us(std::vector<std::uint32_t>& v, double p) {
  if (v.empty()) return 0;
  const std::size_t k =
      std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k] / 1000.0;
}

void usage() {
  std::fprintf(stderr,
               "usage: echo-load --port N [--connections 1024] [--rounds 1000] [--size 64]\n"
               "                 [--threads 1] [--json]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--port")
      o.port = std::atoi(next());
    else if (a == "--connections")
      o.connections = std::atoi(next());
    else if (a == "--rounds")
      o.rounds = std::atoi(next());
    else if (a == "--size")
      o.size = std::strtoull(next(), nullptr, 10);
    else if (a == "--threads")
      o.threads = std::atoi(next());
    else if (a == "--json")
      o.json = true;
    else
      usage();
  }
  if (o.port <= 0 || o.connections <= 0 || o.rounds <= 0 || o.size == 0 || o.threads <= 0) usage();

  std::vector<std::vector<Connection>> shares(static_cast<std::size_t>(o.threads));
  for (int i = 0; i < o.connections; ++i) {
    Connection c;
    c.fd = connect_to(o.port);
    c.rounds_left = o.rounds;
    shares[static_cast<std::size_t>(i % o.threads)].push_back(c);
  }
  std::vector<std::vector<std::uint32_t>> latencies(shares.size());
  for (auto& l : latencies)
    l.reserve(static_cast<std::size_t>(o.connections / o.threads + 1) * o.rounds);
  std::atomic<long> failures{0};
  const auto t0 = Clock::now();
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < shares.size(); ++t) {
    pool.emplace_back([&, t] { drive(o, shares[t], latencies[t], failures); });
  }
  for (auto& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<std::uint32_t> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  for (auto& s : shares) {
    for (auto& c : s) ::close(c.fd);
  }
  const double rts = static_cast<double>(all.size()) / seconds;
  const double p50 = percentile_us(all, 0.50);
  const double p95 = percentile_us(all, 0.95);
  const double p99 = percentile_us(all, 0.99);
  if (o.json) {
    std::printf(
        "{\"round_trips\":%zu,\"seconds\":%.4f,\"rt_per_s\":%.0f,\"p50_us\":%.1f,\"p95_us\":%.1f,"
        "\"p99_us\":%.1f,\"failures\":%ld,\"connections\":%d,\"rounds\":%d,\"size\":%zu}\n",
        all.size(), seconds, rts, p50, p95, p99, failures.load(), o.connections, o.rounds, o.size);
  } else {
    std::printf("%zu round trips in %.3f s: %.0f rt/s, p50 %.1f us, p95 %.1f us, p99 %.1f us%s\n",
                all.size(), seconds, rts, p50, p95, p99, failures.load() != 0 ? " (FAILURES)" : "");
  }
  return failures.load() == 0 ? 0 : 1;
}
