// Finding the owner of a listening TCP socket through /proc.
#include "lib/common/port_owner.hh"

#include <dirent.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ferry::net {
namespace {

constexpr int kTcpListen = 0x0A;

// The inode of a listening socket on `at` in /proc/net/tcp or tcp6, 0 if none. Addresses there
// are the in-kernel words printed as native-endian hex, so they compare with the address's
// bytes read as native words.
unsigned long listening_inode(const Endpoint& at) {
  bool v4 = at.address.is_v4();
  std::ifstream table(v4 ? "/proc/net/tcp" : "/proc/net/tcp6");
  std::string line;
  std::getline(table, line);  // header
  std::array<std::uint32_t, 4> want{};
  std::memcpy(want.data(), at.address.bytes.data(), v4 ? 4 : 16);
  while (std::getline(table, line)) {
    std::istringstream in(line);
    std::string slot, local, remote, state;
    in >> slot >> local >> remote >> state;
    auto colon = local.find(':');
    if (colon == std::string::npos || std::stoi(state, nullptr, 16) != kTcpListen) continue;
    if (std::stoul(local.substr(colon + 1), nullptr, 16) != at.port) continue;
    std::array<std::uint32_t, 4> got{};
    bool any = true;
    for (std::size_t w = 0; w < (v4 ? 1u : 4u); ++w) {
      got[w] = static_cast<std::uint32_t>(std::stoul(local.substr(w * 8, 8), nullptr, 16));
      any &= got[w] == 0;
    }
    if (!any && got != want) continue;
    std::string skip;
    for (int i = 0; i < 5; ++i) in >> skip;  // tx_queue:rx_queue tr:when retrnsmt uid timeout
    unsigned long inode = 0;
    in >> inode;
    if (inode) return inode;
  }
  return 0;
}

}  // namespace

std::string tcp_listener_of(const Endpoint& at) {
  unsigned long inode = 0;
  try {
    inode = listening_inode(at);
  } catch (const std::exception&) {  // a line this parser does not understand: cannot tell
    return "";
  }
  if (inode == 0) return "";
  const std::string target = "socket:[" + std::to_string(inode) + "]";
  DIR* proc = opendir("/proc");
  if (!proc) return "";
  std::string owner;
  while (dirent* p = readdir(proc)) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    std::string fd_dir = std::string("/proc/") + p->d_name + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    if (!fds) continue;
    while (dirent* f = readdir(fds)) {
      char link[64];
      ssize_t n = readlink((fd_dir + "/" + f->d_name).c_str(), link, sizeof(link) - 1);
      if (n <= 0) continue;
      link[n] = '\0';
      if (target == link) {
        std::ifstream comm(std::string("/proc/") + p->d_name + "/comm");
        std::string name;
        std::getline(comm, name);
        owner = name + ", pid " + p->d_name;
        break;
      }
    }
    closedir(fds);
    if (!owner.empty()) break;
  }
  closedir(proc);
  return owner;
}

}  // namespace ferry::net
