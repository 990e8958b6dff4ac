// Test scaffolding for the AF_XDP smoke test: the process's private network namespace and a
// multi-queue veth pair inside it, deleted on scope exit (and with the namespace at process exit).
#pragma once

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ferry::xsk::test {

// Runs a shell command, returns its stdout; throws when it exits non-zero.
inline std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("popen: " + command);
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), pipe)) out += buf.data();
  int status = ::pclose(pipe);
  if (status != 0) throw std::runtime_error(command + " failed: " + out);
  return out;
}

// Moves this process into a new, private network namespace. The kernel deletes it, with every
// interface in it, when the process exits however it exits.
inline void enter_private_netns() {
  if (::unshare(CLONE_NEWNET) != 0) {
    throw std::runtime_error("unshare(CLONE_NEWNET) failed: run the integration suite as root");
  }
  run("ip link set lo up");
  // No IPv6 autoconfiguration chatter on the test links.
  std::ofstream("/proc/sys/net/ipv6/conf/default/disable_ipv6") << "1";
  std::ofstream("/proc/sys/net/ipv6/conf/all/disable_ipv6") << "1";
}

// A veth pair with `queues` rx/tx queues per end, both up; `inner` is where ferry's program and
// sockets go, `outer` has `outer_ip`/24 and a static neighbour for `inner_ip` -> inner's MAC.
class VethPair {
 public:
  VethPair(std::string inner, std::string outer, int queues, const std::string& inner_ip,
           const std::string& outer_ip)
      : inner_(std::move(inner)), outer_(std::move(outer)) {
    std::string q = std::to_string(queues);
    run("ip link add " + inner_ + " numrxqueues " + q + " numtxqueues " + q +
        " type veth peer name " + outer_ + " numrxqueues " + q + " numtxqueues " + q);
    run("ip link set " + inner_ + " up");
    run("ip link set " + outer_ + " up");
    run("ip addr add " + outer_ip + "/24 dev " + outer_);
    run("ip neigh replace " + inner_ip + " lladdr " + mac(inner_) + " dev " + outer_ +
        " nud permanent");
  }
  ~VethPair() { std::system(("ip link del " + inner_ + " >/dev/null 2>&1").c_str()); }
  VethPair(const VethPair&) = delete;
  VethPair& operator=(const VethPair&) = delete;

  const std::string& inner() const { return inner_; }
  const std::string& outer() const { return outer_; }
  int inner_ifindex() const { return static_cast<int>(if_nametoindex(inner_.c_str())); }

  // "aa:bb:cc:dd:ee:ff" of an interface in this namespace.
  static std::string mac(const std::string& ifname) {
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname.c_str());
    int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    int rc = ::ioctl(fd, SIOCGIFHWADDR, &ifr);
    ::close(fd);
    if (rc != 0) throw std::runtime_error("SIOCGIFHWADDR " + ifname);
    const auto* b = reinterpret_cast<const unsigned char*>(ifr.ifr_hwaddr.sa_data);
    char text[18];
    std::snprintf(text, sizeof(text), "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4],
                  b[5]);
    return text;
  }

 private:
  std::string inner_;
  std::string outer_;
};

}  // namespace ferry::xsk::test
