// Finding, or mounting, the bpffs that holds ferry-decap's pins.
#include "lib/decap/bpffs.hh"

#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ferry::decap {
namespace {

namespace fs = std::filesystem;

std::string mount_namespace(pid_t pid) {
  std::error_code ec;
  auto target = fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/mnt", ec);
  return ec ? std::string() : target.string();
}

// The nearest of `path` and its parents that exists.
fs::path existing_ancestor(fs::path path) {
  std::error_code ec;
  while (!fs::exists(path, ec) && path.has_relative_path()) path = path.parent_path();
  return path;
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": creating the pin directory failed: " + ec.message());
}

}  // namespace

bool on_bpffs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == BPF_FS_MAGIC;
}

std::string ensure_bpffs(const std::string& pin_dir) {
  fs::path dir = fs::absolute(pin_dir).lexically_normal();
  if (on_bpffs(existing_ancestor(dir).string())) {
    make_directories(dir.string());
    return "";
  }
  fs::path sys_bpf = "/sys/fs/bpf";
  auto [end, rest] = std::mismatch(sys_bpf.begin(), sys_bpf.end(), dir.begin(), dir.end());
  fs::path root = end == sys_bpf.end() ? sys_bpf : dir;
  std::string mine = mount_namespace(getpid()), parents = mount_namespace(getppid());
  if (!mine.empty() && !parents.empty() && mine != parents) {
    throw std::runtime_error(
        dir.string() +
        " is not on a bpffs, and this command runs in a mount namespace of its own " +
        "(as `ip netns exec` gives each command): a bpffs mounted at " + root.string() +
        " would vanish when it exits, taking the attachment with it. Use `nsenter --net=" +
        "/run/netns/NAME ferry-decap ...` instead, or pass --pin-dir on a mounted bpffs");
  }
  make_directories(root.string());
  if (::mount("bpf", root.c_str(), "bpf", 0, "mode=0700") != 0) {
    throw std::runtime_error(root.string() +
                             ": mounting a bpffs for the pins failed: " + std::strerror(errno) +
                             (errno == EPERM ? " (needs CAP_SYS_ADMIN)" : ""));
  }
  make_directories(dir.string());
  return root.string();
}

}  // namespace ferry::decap
