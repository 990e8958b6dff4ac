// proxy-load: the client of the proxy benchmark. `rr` keeps one request in flight on each of N
// connections for a fixed time (requests/s, Gbps of response payload, p50/p99); `idle` opens N
// connections, makes one round trip on each so the proxy really holds both sides, and keeps them
// open until stdin closes, so the driver can read the proxy's memory meanwhile.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
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

#include "request_header.hh"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string mode;
  int port = 0;
  int connections = 64;
  std::uint32_t request_bytes = 64;
  std::uint32_t response_bytes = 65536;
  double duration_s = 5;
  int threads = 1;
  int batch = 256;         // idle: connections opened (and answered) before the next batch
  bool round_trip = true;  // idle: one request/response on each connection before holding it
  bool json = false;
};

struct Connection {
  int fd = -1;
  std::size_t sent_bytes = 0;
  std::uint64_t received_bytes = 0;
  bool done = false;
  Clock::time_point started;
};

struct ThreadResult {
  std::vector<std::uint32_t> latencies_ns;
  std::uint64_t payload_bytes = 0;
  long failures = 0;
};

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// A blocking connect (on loopback it completes at the handshake), then non-blocking; -1 with
// errno on failure. Bounded: a proxy whose accept queue stays full (a connection cap) would
// otherwise keep the SYN retransmitting for two minutes.
int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const timeval connect_timeout{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &connect_timeout, sizeof(connect_timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::fcntl(fd, F_SETFL, O_NONBLOCK);
  return fd;
}

std::vector<char> make_request(const Options& o) {
  std::vector<char> request(o.request_bytes, 'q');
  ferry_bench::write_request_header(request.data(), {o.request_bytes, o.response_bytes});
  return request;
}

// Request/response on a set of connections with one epoll. run_until: stop starting requests at
// this time (rr) or when every connection has made one round trip (idle batch, done flags).
class RoundTripDriver {
 public:
  RoundTripDriver(const Options& o, std::vector<Connection>& conns, ThreadResult& result)
      : o_(o), conns_(conns), result_(result), request_(make_request(o)), scratch_(256 * 1024) {
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (ep_ < 0) die("epoll_create1");
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      epoll_event e{};
      e.events = EPOLLIN;
      e.data.u64 = i;
      ::epoll_ctl(ep_, EPOLL_CTL_ADD, conns_[i].fd, &e);
    }
  }
  ~RoundTripDriver() { ::close(ep_); }
  RoundTripDriver(const RoundTripDriver&) = delete;
  RoundTripDriver& operator=(const RoundTripDriver&) = delete;

  // repeat: start the next request on a connection as soon as its response is complete.
  void run(Clock::time_point deadline, bool repeat) {
    std::size_t active = 0;
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      if (conns_[i].done) continue;
      ++active;
      start(i);
    }
    epoll_event events[512];
    Clock::time_point last_progress = Clock::now();
    while (active > 0) {
      const int n = ::epoll_wait(ep_, events, 512, 100);
      const Clock::time_point now = Clock::now();
      if (now >= deadline) break;
      if (n > 0) last_progress = now;
      if (now - last_progress > std::chrono::seconds(10)) {
        std::fprintf(stderr, "proxy-load: no progress for 10 s with %zu connections waiting\n",
                     active);
        result_.failures += static_cast<long>(active);
        break;
      }
      for (int k = 0; k < n; ++k) {
        const std::size_t i = events[k].data.u64;
        Connection& c = conns_[i];
        if (c.done) continue;
        if ((events[k].events & EPOLLOUT) != 0 && push(i)) set_out(i, false);
        if ((events[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) == 0) continue;
        if (!drain(i, repeat)) --active;
      }
    }
  }

 private:
  // Reads what is there; false once the connection is finished (failed, or done without repeat).
  bool drain(std::size_t i, bool repeat) {
    Connection& c = conns_[i];
    for (;;) {
      const ssize_t r = ::recv(c.fd, scratch_.data(), scratch_.size(), 0);
      if (r < 0 && errno == EAGAIN) return true;
      if (r <= 0) {
        ++result_.failures;
        c.done = true;
        ::epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
        return false;
      }
      c.received_bytes += static_cast<std::uint64_t>(r);
      result_.payload_bytes += static_cast<std::uint64_t>(r);
      if (c.received_bytes < o_.response_bytes) continue;
      if (c.received_bytes > o_.response_bytes) ++result_.failures;  // more than was asked for
      result_.latencies_ns.push_back(static_cast<std::uint32_t>(std::min<std::int64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - c.started).count(),
          UINT32_MAX)));
      if (!repeat) {
        c.done = true;
        return false;
      }
      start(i);
    }
  }

  void start(std::size_t i) {
    Connection& c = conns_[i];
    c.sent_bytes = 0;
    c.received_bytes = 0;
    c.started = Clock::now();
    if (!push(i)) set_out(i, true);
  }

  bool push(std::size_t i) {  // true: the request is completely written
    Connection& c = conns_[i];
    while (c.sent_bytes < request_.size()) {
      const ssize_t n = ::send(c.fd, request_.data() + c.sent_bytes, request_.size() - c.sent_bytes,
                               MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EAGAIN) return false;
        ++result_.failures;
        return true;
      }
      c.sent_bytes += static_cast<std::size_t>(n);
    }
    return true;
  }

  void set_out(std::size_t i, bool out) {
    epoll_event e{};
    e.events = EPOLLIN | (out ? EPOLLOUT : 0u);
    e.data.u64 = i;
    ::epoll_ctl(ep_, EPOLL_CTL_MOD, conns_[i].fd, &e);
  }

  const Options& o_;
  std::vector<Connection>& conns_;
  ThreadResult& result_;
  std::vector<char> request_;
  std::vector<char> scratch_;
  int ep_ = -1;
};

// Latency at quantile q of an ascending-sorted sample, in microseconds.
double quantile_us(const std::vector<std::uint32_t>& sorted_ns, double q) {
  if (sorted_ns.empty()) return 0;
  const auto k = static_cast<std::size_t>(q * static_cast<double>(sorted_ns.size() - 1));
  return sorted_ns[k] / 1000.0;
}

int run_request_response(const Options& o) {
  std::vector<std::vector<Connection>> shares(static_cast<std::size_t>(o.threads));
  for (int i = 0; i < o.connections; ++i) {
    Connection c;
    c.fd = connect_to(o.port);
    if (c.fd < 0) die("connect");
    shares[static_cast<std::size_t>(i % o.threads)].push_back(c);
  }
  std::vector<ThreadResult> results(shares.size());
  const auto t0 = Clock::now();
  const auto deadline =
      t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < shares.size(); ++t) {
    pool.emplace_back([&, t] {
      results[t].latencies_ns.reserve(1 << 20);
      RoundTripDriver(o, shares[t], results[t]).run(deadline, true);
    });
  }
  for (auto& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& s : shares) {
    for (auto& c : s) ::close(c.fd);
  }
  std::vector<std::uint32_t> all;
  std::uint64_t payload_bytes = 0;
  long failures = 0;
  for (auto& r : results) {
    all.insert(all.end(), r.latencies_ns.begin(), r.latencies_ns.end());
    payload_bytes += r.payload_bytes;
    failures += r.failures;
  }
  const double rps = static_cast<double>(all.size()) / seconds;
  const double gbps = static_cast<double>(payload_bytes) * 8 / seconds / 1e9;
  std::sort(all.begin(), all.end());
  const double p50 = quantile_us(all, 0.50);
  const double p99 = quantile_us(all, 0.99);
  if (o.json) {
    std::printf(
        "{\"requests\":%zu,\"seconds\":%.4f,\"requests_per_s\":%.0f,\"response_payload_bytes\":%"
        "llu,"
        "\"gbps\":%.3f,\"p50_us\":%.1f,\"p99_us\":%.1f,\"failures\":%ld,\"connections\":%d,"
        "\"request_bytes\":%u,\"response_bytes\":%u}\n",
        all.size(), seconds, rps, static_cast<unsigned long long>(payload_bytes), gbps, p50, p99,
        failures, o.connections, o.request_bytes, o.response_bytes);
  } else {
    std::printf(
        "%zu requests in %.3f s: %.0f req/s, %.3f Gbps response payload, p50 %.1f us, "
        "p99 %.1f us%s\n",
        all.size(), seconds, rps, gbps, p50, p99, failures != 0 ? " (FAILURES)" : "");
  }
  return failures == 0 ? 0 : 1;
}

int run_idle(const Options& o) {
  std::vector<int> held;
  held.reserve(static_cast<std::size_t>(o.connections));
  long failures = 0;
  ThreadResult scratch_result;
  const auto t0 = Clock::now();
  while (static_cast<int>(held.size()) < o.connections && failures == 0) {
    const int n = std::min(o.batch, o.connections - static_cast<int>(held.size()));
    std::vector<Connection> batch;
    for (int i = 0; i < n; ++i) {
      Connection c;
      c.fd = connect_to(o.port);
      if (c.fd < 0) {
        std::fprintf(stderr, "proxy-load: connect #%zu: %s\n", held.size() + batch.size(),
                     std::strerror(errno));
        ++failures;
        break;
      }
      batch.push_back(c);
    }
    if (o.round_trip && !batch.empty()) {
      RoundTripDriver(o, batch, scratch_result).run(Clock::time_point::max(), false);
    }
    for (auto& c : batch) held.push_back(c.fd);
  }
  failures += scratch_result.failures;
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (o.json) {
    std::printf("{\"held\":%zu,\"seconds\":%.3f,\"round_trip\":%s,\"failures\":%ld}\n", held.size(),
                seconds, o.round_trip ? "true" : "false", failures);
  } else {
    std::printf("holding %zu connections (opened in %.3f s)%s; close stdin to release them\n",
                held.size(), seconds, failures != 0 ? " (FAILURES)" : "");
  }
  std::fflush(stdout);
  char line[64];
  while (::read(STDIN_FILENO, line, sizeof(line)) > 0) {
    if (std::memchr(line, '\n', sizeof(line)) != nullptr) break;
  }
  for (int fd : held) ::close(fd);
  return failures == 0 ? 0 : 1;
}

void usage() {
  std::fprintf(stderr,
               "usage: proxy-load rr   --port N [--connections 64] [--request-bytes 64]\n"
               "                       [--response-bytes 65536] [--duration-s 5] [--threads 1]"
               " [--json]\n"
               "       proxy-load idle --port N [--connections 64] [--request-bytes 64]\n"
               "                       [--response-bytes 64] [--batch 256] [--no-round-trip]"
               " [--json]\n"
               "request-bytes >= %u (the request header); idle holds the connections until stdin"
               " closes or a line arrives\n",
               ferry_bench::kMinRequestBytes);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc < 2) usage();
  o.mode = argv[1];
  if (o.mode == "idle") o.response_bytes = 64;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--port") {
      o.port = std::atoi(next());
    } else if (a == "--connections") {
      o.connections = std::atoi(next());
    } else if (a == "--request-bytes") {
      o.request_bytes = static_cast<std::uint32_t>(std::strtoul(next(), nullptr, 10));
    } else if (a == "--response-bytes") {
      o.response_bytes = static_cast<std::uint32_t>(std::strtoul(next(), nullptr, 10));
    } else if (a == "--duration-s") {
      o.duration_s = std::atof(next());
    } else if (a == "--threads") {
      o.threads = std::atoi(next());
    } else if (a == "--batch") {
      o.batch = std::atoi(next());
    } else if (a == "--no-round-trip") {
      o.round_trip = false;
    } else if (a == "--json") {
      o.json = true;
    } else {
      usage();
    }
  }
  if (o.port <= 0 || o.connections <= 0 || o.threads <= 0 || o.batch <= 0 ||
      o.request_bytes < ferry_bench::kMinRequestBytes || o.response_bytes == 0 ||
      o.duration_s <= 0) {
    usage();
  }
  if (o.mode == "rr") return run_request_response(o);
  if (o.mode == "idle") return run_idle(o);
  usage();
}
