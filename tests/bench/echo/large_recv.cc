// large-recv: the receiving side of the large-response benchmark, on the TCP runtime. Each
// connection task sends a 1-byte request and receives a response (64 KiB by default) through its
// worker's provided-buffer ring, over and over, either streaming (each batch given back as soon as
// it is counted) or holding the whole response first. Reports Gbps, receive completions per
// response, stitched bytes, ENOBUFS events, parks and the CPU the process spent.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "lib/runtime/io.hh"
#include "lib/runtime/recv_stream.hh"
#include "lib/runtime/runtime.hh"
#include "lib/uring/probe.hh"
#include "lib/uring/stitch.hh"

namespace {

using namespace ferry;
using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;
  int connections = 64;
  std::uint32_t workers = 2;
  std::uint64_t response_bytes = 65536;
  std::uint64_t total_mib = 2048;
  std::uint32_t buffers = 256;
  std::uint32_t buffer_bytes = 16384;
  uring::Tristate bundle = uring::Tristate::automatic;
  uring::Tristate incremental = uring::Tristate::automatic;
  std::uint32_t cap_bytes = uring::kDefaultSocketCapBytes;  // RecvLimits::socket_cap_bytes
  bool whole = false;  // hold every batch of a response until it is complete
};

struct ConnectionStats {
  std::uint64_t responses = 0;
  std::uint64_t bytes = 0;
  metrics::Counter stitched;  // bytes copied because a batch was more than two runs
  bool failed = false;
};

// co_await: sends the 1-byte request; the result is the bytes sent (1, or negative errno).
runtime::SendAll send_request(int fd, std::vector<iovec>& cursor) {
  static std::byte request[1] = {std::byte{'q'}};
  static const iovec request_iov{request, 1};
  return runtime::send_all(fd, std::span<const iovec>(&request_iov, 1), cursor);
}

// Streaming: each batch is counted and given back before the next is awaited, and the last one
// before the next request goes out, so a connection holds at most one completion's buffers.
runtime::Task stream_fetch(runtime::Worker& home, int fd, std::uint64_t response_bytes,
                           std::uint64_t rounds, ConnectionStats& stats, std::atomic<int>& left) {
  runtime::RecvStream stream(home, fd);
  runtime::RecvBatch batch;
  std::vector<iovec> cursor;
  for (std::uint64_t r = 0; r < rounds && !stats.failed; ++r) {
    if (co_await send_request(fd, cursor) != 1) {
      stats.failed = true;
      break;
    }
    std::uint64_t got = 0;
    while (got < response_bytes) {
      if (!co_await stream.next(batch)) {  // gives the previous batch back first
        stats.failed = true;
        break;
      }
      got += batch.bytes;
    }
    co_await stream.release(std::span<runtime::RecvBatch>(&batch, 1));
    if (got > response_bytes) stats.failed = true;  // one request, one response: never more
    stats.bytes += got;
    ++stats.responses;
  }
  co_await stream.close(batch);
  left.fetch_sub(1);
}

// Whole responses: every batch of a response is held until the response is complete, as a
// consumer that needs it in one piece (a parser) would.
runtime::Task fetch(runtime::Worker& home, int fd, std::uint64_t response_bytes,
                    std::uint64_t rounds, ConnectionStats& stats, std::atomic<int>& left) {
  runtime::RecvStream stream(home, fd);
  std::vector<runtime::RecvBatch> parts(4);  // the batches of the response being received
  std::vector<iovec> response;               // their spans, in order
  std::vector<iovec> cursor;
  std::vector<std::byte> scratch(response_bytes);
  for (std::uint64_t r = 0; r < rounds && !stats.failed; ++r) {
    if (co_await send_request(fd, cursor) != 1) {
      stats.failed = true;
      break;
    }
    std::uint64_t got = 0;
    std::size_t used = 0;
    while (got < response_bytes) {
      if (used == parts.size()) parts.emplace_back();
      // parts[used] holds nothing (given back below), so next() gives nothing back here: the
      // whole response stays in the buffers until it is complete.
      if (!co_await stream.next(parts[used])) {
        stats.failed = true;
        break;
      }
      got += parts[used].bytes;
      ++used;
    }
    // A consumer that needs the response in one piece (a parser) uses it in place when it is
    // at most two runs (two: the ring wrap) and stitches it otherwise.
    response.clear();
    for (std::size_t i = 0; i < used; ++i) {
      response.insert(response.end(), parts[i].spans.begin(), parts[i].spans.end());
    }
    if (uring::contiguous_runs(response) > 2) uring::contiguous(response, scratch, stats.stitched);
    co_await stream.release(std::span<runtime::RecvBatch>(parts.data(), used));
    if (got > response_bytes) stats.failed = true;  // one request, one response: never more
    stats.bytes += got;
    ++stats.responses;
  }
  co_await stream.close(parts[0]);
  left.fetch_sub(1);
}

uring::Tristate tristate(const std::string& v) {
  if (v == "on") return uring::Tristate::on;
  if (v == "off") return uring::Tristate::off;
  return uring::Tristate::automatic;
}

void usage() {
  std::fprintf(stderr,
               "usage: large-recv --port N [--connections 64] [--workers 2] [--response-bytes "
               "65536]\n                  [--total-mib 2048] [--buffers 256] [--buffer-bytes "
               "16384]\n                  [--bundle on|off|auto] [--incremental on|off|auto]\n"
               "                  [--cap-bytes 65536 (0: uncapped)] [--consumer stream|whole]\n");
  std::exit(2);
}

double cpu_seconds(const timeval& tv) {
  return tv.tv_sec + tv.tv_usec / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--port")
      o.port = std::stoi(next());
    else if (a == "--connections")
      o.connections = std::stoi(next());
    else if (a == "--workers")
      o.workers = static_cast<std::uint32_t>(std::stoul(next()));
    else if (a == "--response-bytes")
      o.response_bytes = std::stoull(next());
    else if (a == "--total-mib")
      o.total_mib = std::stoull(next());
    else if (a == "--buffers")
      o.buffers = static_cast<std::uint32_t>(std::stoul(next()));
    else if (a == "--buffer-bytes")
      o.buffer_bytes = static_cast<std::uint32_t>(std::stoul(next()));
    else if (a == "--bundle")
      o.bundle = tristate(next());
    else if (a == "--incremental")
      o.incremental = tristate(next());
    else if (a == "--cap-bytes")
      o.cap_bytes = static_cast<std::uint32_t>(std::stoul(next()));
    else if (a == "--consumer")
      o.whole = next() == "whole";
    else
      usage();
  }
  if (o.port <= 0 || o.connections <= 0) usage();

  runtime::RuntimeConfig config;
  config.workers = o.workers;
  config.ring.entries = 512;
  uring::RecvOptions recv;
  recv.bundle = o.bundle;
  recv.incremental = o.incremental;
  config.recv_modes = uring::resolve_modes(recv, uring::kernel_features());
  config.buffers = uring::BufferRingConfig{.count = o.buffers,
                                           .buffer_bytes = o.buffer_bytes,
                                           .group_id = 0,
                                           .incremental = config.recv_modes.incremental};
  config.recv_limits.socket_cap_bytes = o.cap_bytes;
  runtime::Runtime rt(config);
  rt.start();

  std::vector<int> fds;
  for (int i = 0; i < o.connections; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(o.port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      std::perror("connect");
      return 1;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    ::fcntl(fd, F_SETFL, O_NONBLOCK);
    fds.push_back(fd);
  }
  const std::uint64_t rounds = std::max<std::uint64_t>(
      1, (o.total_mib << 20) / (o.response_bytes * static_cast<std::uint64_t>(o.connections)));
  std::vector<std::unique_ptr<ConnectionStats>> stats;
  std::atomic<int> left{o.connections};

  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto t0 = Clock::now();
  for (int i = 0; i < o.connections; ++i) {
    stats.push_back(std::make_unique<ConnectionStats>());
    runtime::Worker& home = rt.worker(static_cast<std::uint32_t>(i) % o.workers);
    rt.spawn(o.whole ? fetch(home, fds[i], o.response_bytes, rounds, *stats.back(), left)
                     : stream_fetch(home, fds[i], o.response_bytes, rounds, *stats.back(), left));
  }
  std::int64_t peak_held = 0;  // most buffers one worker's ring had out at a 5 ms sample
  while (left.load() > 0) {
    // The main thread only waits for the tasks (a coarse poll keeps it off the CPU) and samples
    // how many buffers the rings have out (the free gauge is a relaxed atomic, made to be read).
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    for (std::uint32_t w = 0; w < o.workers; ++w) {
      const uring::BufferRing& ring = rt.worker(w).engine().buffers();
      peak_held = std::max<std::int64_t>(peak_held, ring.count() - ring.free_gauge().value());
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  rt.stop();

  std::uint64_t bytes = 0, responses = 0, stitched = 0, failed = 0;
  for (auto& s : stats) {
    bytes += s->bytes;
    responses += s->responses;
    stitched += s->stitched.value();
    failed += s->failed ? 1 : 0;
  }
  std::uint64_t cqes = 0, enobufs = 0, parks = 0, rearms = 0, buffer_cqes = 0, buffers_taken = 0;
  for (std::uint32_t w = 0; w < o.workers; ++w) {
    cqes += rt.worker(w).recv_counters().cqes.value();
    enobufs += rt.worker(w).recv_counters().enobufs.value();
    parks += rt.worker(w).recv_counters().parks.value();
    rearms += rt.worker(w).recv_counters().rearms.value();
    const metrics::HistogramValue h = rt.worker(w).recv_counters().buffers_per_cqe.snapshot();
    buffer_cqes += h.count;
    buffers_taken += static_cast<std::uint64_t>(h.sum);
  }
  for (int fd : fds) ::close(fd);
  const double sys = cpu_seconds(after.ru_stime) - cpu_seconds(before.ru_stime);
  const double user = cpu_seconds(after.ru_utime) - cpu_seconds(before.ru_utime);
  std::printf(
      "{\"connections\":%d,\"workers\":%u,\"bundle\":%s,\"incremental\":%s,\"responses\":%llu,"
      "\"seconds\":%.3f,\"gbps\":%.2f,\"cqes_per_response\":%.3f,\"stitched_bytes\":%llu,"
      "\"enobufs\":%llu,\"parks_per_response\":%.3f,\"rearms_per_response\":%.3f,"
      "\"buffers_per_cqe\":%.2f,\"peak_held_buffers\":%lld,\"cap_bytes\":%u,\"consumer\":\"%s\","
      "\"sys_cpu_pct\":%.0f,\"user_cpu_pct\":%.0f,"
      "\"failed\":%llu}\n",
      o.connections, o.workers, config.recv_modes.bundle ? "true" : "false",
      config.recv_modes.incremental ? "true" : "false", static_cast<unsigned long long>(responses),
      seconds, bytes * 8.0 / seconds / 1e9,
      responses ? static_cast<double>(cqes) / static_cast<double>(responses) : 0.0,
      static_cast<unsigned long long>(stitched), static_cast<unsigned long long>(enobufs),
      responses ? static_cast<double>(parks) / static_cast<double>(responses) : 0.0,
      responses ? static_cast<double>(rearms) / static_cast<double>(responses) : 0.0,
      buffer_cqes ? static_cast<double>(buffers_taken) / static_cast<double>(buffer_cqes) : 0.0,
      static_cast<long long>(peak_held), o.cap_bytes, o.whole ? "whole" : "stream",
      100.0 * sys / seconds, 100.0 * user / seconds, static_cast<unsigned long long>(failed));
  return failed == 0 ? 0 : 1;
}
