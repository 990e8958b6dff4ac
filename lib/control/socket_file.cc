// The control socket's file on disk: parent directories, stale-file takeover, safe bind.
#include "lib/control/socket_file.hh"

#include <fmt/format.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "lib/common/log.hh"

namespace ferry::control {
namespace {

constexpr mode_t kDirectoryMode = 0750;

std::runtime_error socket_error(const std::string& path, const std::string& what) {
  return std::runtime_error(fmt::format("control.socket {}: {}", path, what));
}

sockaddr_un socket_address(const std::string& path, socklen_t& length) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty()) throw socket_error(path, "the path is empty");
  if (path.size() >= sizeof addr.sun_path) {
    throw socket_error(path, fmt::format("the path is longer than {} bytes, the limit of a Unix "
                                         "socket address",
                                         sizeof addr.sun_path - 1));
  }
  std::memcpy(addr.sun_path, path.data(), path.size());
  length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() + 1);
  return addr;
}

// mkdir -p of the socket's directory; only directories created here get our mode and group, an
// existing directory is the operator's (or systemd's RuntimeDirectory=) to set up.
void create_parent_directories(const std::string& socket_path, std::optional<gid_t> gid) {
  auto slash = socket_path.rfind('/');
  if (slash == std::string::npos || slash == 0) return;
  std::string dir = socket_path.substr(0, slash);

  std::vector<std::string> missing;
  for (std::string at = dir; !at.empty();) {
    struct stat st {};
    if (::stat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        throw socket_error(socket_path, fmt::format("{} exists and is not a directory", at));
      }
      break;
    }
    if (errno != ENOENT) {
      throw socket_error(socket_path, fmt::format("cannot stat {}: {}", at, std::strerror(errno)));
    }
    missing.push_back(at);
    auto up = at.rfind('/');
    if (up == std::string::npos || up == 0) break;
    at.resize(up);
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), kDirectoryMode) != 0 && errno != EEXIST) {
      throw socket_error(socket_path,
                         fmt::format("cannot create directory {}: {}", *it, std::strerror(errno)));
    }
    // mkdir's mode went through the umask; the group must be able to reach the socket.
    if (::chmod(it->c_str(), kDirectoryMode) != 0 ||
        (gid && ::chown(it->c_str(), static_cast<uid_t>(-1), *gid) != 0)) {
      throw socket_error(socket_path, fmt::format("cannot set mode/group of directory {}: {}", *it,
                                                  std::strerror(errno)));
    }
  }
}

// An existing file at the path: a stale socket is removed; anything else stops us.
void clear_existing_file(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw socket_error(path, fmt::format("cannot stat: {}", std::strerror(errno)));
  }
  if (S_ISLNK(st.st_mode)) {
    throw socket_error(path,
                       "is a symbolic link; refusing to follow or remove it (remove it "
                       "yourself if it is yours, or choose another control.socket)");
  }
  if (!S_ISSOCK(st.st_mode)) {
    throw socket_error(path,
                       "exists and is not a socket; refusing to replace it (remove it "
                       "yourself if it is yours, or choose another control.socket)");
  }

  // A socket file: ask whether anyone answers on it.
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!probe) throw socket_error(path, fmt::format("socket: {}", std::strerror(errno)));
  socklen_t length = 0;
  sockaddr_un addr = socket_address(path, length);
  if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&addr), length) == 0) {
    ucred cred{};
    socklen_t cred_length = sizeof cred;
    std::string pid = "unknown";
    if (::getsockopt(probe.get(), SOL_SOCKET, SO_PEERCRED, &cred, &cred_length) == 0) {
      pid = std::to_string(cred.pid);
    }
    throw socket_error(path, fmt::format("another ferryd is already running (pid {})", pid));
  }
  int err = errno;
  if (err == EAGAIN) {
    // Its accept backlog is full: alive, just busy.
    throw socket_error(path, "another ferryd is already running (pid unknown, its socket is busy)");
  }
  if (err != ECONNREFUSED) {
    throw socket_error(path,
                       fmt::format("cannot probe the existing socket: {}", std::strerror(err)));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw socket_error(
        path, fmt::format("cannot remove the stale socket file: {}", std::strerror(errno)));
  }
  log::notice("control.socket {}: replaced a stale socket file (nothing was listening on it)",
              path);
}

}  // namespace

std::optional<gid_t> lookup_group(const std::string& name) {
  long hint = ::sysconf(_SC_GETGR_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<std::size_t>(hint) : 4096);
  for (;;) {
    group entry{};
    group* found = nullptr;
    int rc = ::getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (rc == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    if (rc != 0) {
      throw std::runtime_error(
          fmt::format("control.group '{}': cannot look it up: {}", name, std::strerror(rc)));
    }
    if (found == nullptr) return std::nullopt;
    return found->gr_gid;
  }
}

BoundSocketFile bind_socket_file(const std::string& path, mode_t mode,
                                 const std::optional<std::string>& group, int backlog) {
  mode &= 0777;
  socklen_t length = 0;
  sockaddr_un addr = socket_address(path, length);

  std::optional<gid_t> gid;
  if (group) {
    gid = lookup_group(*group);
    if (!gid) {
      throw std::runtime_error(
          fmt::format("control.group '{0}' does not exist: create it "
                      "(groupadd --system {0}) or set control.group to null",
                      *group));
    }
  }

  create_parent_directories(path, gid);
  clear_existing_file(path);

  BoundSocketFile bound;
  bound.fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!bound.fd) throw socket_error(path, fmt::format("socket: {}", std::strerror(errno)));

  // bind() creates the file with 0777 & ~umask; with this umask it is born no wider than `mode`,
  // so there is no window in which chmod has not yet narrowed it. The umask is process-wide, but
  // it is only ever narrowed, for the duration of one bind at startup.
  mode_t old_umask = ::umask(static_cast<mode_t>(~mode & 0777));
  int rc = ::bind(bound.fd.get(), reinterpret_cast<const sockaddr*>(&addr), length);
  int bind_errno = errno;
  ::umask(old_umask);
  if (rc != 0) {
    if (bind_errno == EADDRINUSE) {
      throw socket_error(path,
                         "bind: the path was created by someone else meanwhile; is another "
                         "ferryd starting?");
    }
    throw socket_error(path, fmt::format("bind: {}", std::strerror(bind_errno)));
  }

  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    throw socket_error(path, "the socket file vanished right after bind");
  }
  bound.identity = {st.st_dev, st.st_ino};

  try {
    if (::chmod(path.c_str(), mode) != 0) {
      throw socket_error(path, fmt::format("chmod {:04o}: {}", mode, std::strerror(errno)));
    }
    if (gid && ::lchown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) {
      throw socket_error(path, fmt::format("cannot give it to group '{}': {} (ferryd must run as "
                                           "root or be a member of the group)",
                                           *group, std::strerror(errno)));
    }
    if (::listen(bound.fd.get(), backlog) != 0) {
      throw socket_error(path, fmt::format("listen: {}", std::strerror(errno)));
    }
  } catch (...) {
    remove_socket_file(path, bound.identity);
    throw;
  }
  return bound;
}

bool remove_socket_file(const std::string& path, const SocketFileIdentity& identity) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  if (st.st_dev != identity.dev || st.st_ino != identity.ino) return false;
  return ::unlink(path.c_str()) == 0;
}

}  // namespace ferry::control
