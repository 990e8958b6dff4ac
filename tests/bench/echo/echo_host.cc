// echo-host: a TcpPlane serving one echo service on 127.0.0.1 (port 0), as ferryd would run it,
// for the echo benchmark. Prints "port N"; then answers stdin commands: "counters" prints the
// per-worker scheduler counters as one JSON line, "quit" (or EOF) stops.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "lib/common/log.hh"
#include "lib/metrics/registry.hh"
#include "lib/tcp_plane/tcp_plane.hh"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: echo-host [--workers 2] [--io-ready inbox|global|index]\n"
               "                 [--buffers COUNT] [--buffer-bytes BYTES]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ferry;
  log::init(log::Level::warning);
  config::Config config;
  config.tcp.workers = 2;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--workers") {
      config.tcp.workers = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--io-ready") {
      const std::string m = next();
      if (m == "inbox")
        config.tcp.scheduler.io_ready = config::IoReadyMode::inbox;
      else if (m == "global")
        config.tcp.scheduler.io_ready = config::IoReadyMode::global;
      else if (m == "index")
        config.tcp.scheduler.io_ready = config::IoReadyMode::index;
      else
        usage();
    } else if (a == "--buffers") {
      config.tcp.buffers.count = static_cast<std::uint32_t>(std::stoul(next()));
    } else if (a == "--buffer-bytes") {
      config.tcp.buffers.bytes = static_cast<std::uint32_t>(std::stoul(next()));
    } else {
      usage();
    }
  }
  config::ServiceConfig echo;
  echo.name = "echo";
  echo.vip = *net::IpAddress::parse("127.0.0.1");
  echo.port = 0;
  echo.protocols = {.udp = false, .tcp = true};
  echo.mode = config::ServiceMode::echo;
  config.services.push_back(echo);

  metrics::Registry registry;
  tcp::TcpPlane plane(registry);
  try {
    plane.start(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "echo-host: %s\n", e.what());
    return 1;
  }
  std::printf("port %u\n", static_cast<unsigned>(plane.bound_address("echo")->port));
  std::printf("%s\n", plane.status().dump().c_str());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "counters") {
      std::printf("%s\n", plane.workers().dump().c_str());
      std::fflush(stdout);
    } else if (line == "quit") {
      break;
    }
  }
  plane.stop();
  return 0;
}
