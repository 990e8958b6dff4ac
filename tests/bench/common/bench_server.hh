// What every epoll benchmark server does the same way: die on a failed syscall, stop on
// SIGTERM/SIGINT (ignoring SIGPIPE), and listen on 127.0.0.1:PORT, printing "port N" for the
// driver (PORT 0 picks a free one).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace ferry_bench {

inline volatile sig_atomic_t g_stop = 0;

[[noreturn]] inline void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

// SIGTERM and SIGINT set g_stop; SIGPIPE is ignored (a peer that went away is an EPIPE).
inline void stop_on_signals() {
  signal(SIGTERM, [](int) { g_stop = 1; });
  signal(SIGINT, [](int) { g_stop = 1; });
  signal(SIGPIPE, SIG_IGN);
}

// A non-blocking listener on 127.0.0.1:`port` (backlog 4096); prints "port N" and flushes.
inline int listen_loopback(int port) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) die("socket");
  int one = 1;
  ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) die("bind");
  if (::listen(listener, 4096) != 0) die("listen");
  socklen_t len = sizeof(addr);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  std::printf("port %d\n", ntohs(addr.sin_port));
  std::fflush(stdout);
  return listener;
}

}  // namespace ferry_bench
