// The control socket's file on disk: created safely (never through a symlink, never over a live
// daemon's socket), given its mode and group, and removed only while it is still ours.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "lib/common/unique_fd.hh"

namespace ferry::control {

// Which file we bound, so stop() does not unlink a socket another daemon has bound since.
struct SocketFileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};

struct BoundSocketFile {
  UniqueFd fd;  // listening, non-blocking, close-on-exec
  SocketFileIdentity identity;
};

// Resolves a group name; nullopt when no such group exists. Throws on lookup failure.
std::optional<gid_t> lookup_group(const std::string& name);

// Creates missing parent directories (0750, given to `group` when set), replaces a stale socket
// file, binds with a umask so the file is never wider than `mode`, then applies mode and group
// and listens with `backlog`. Throws std::runtime_error with "control.socket PATH: ..." (or
// "control.group") when it refuses or fails; nothing is left behind on failure.
BoundSocketFile bind_socket_file(const std::string& path, mode_t mode,
                                 const std::optional<std::string>& group, int backlog);

// Unlinks `path` if it is still the file described by `identity`; true when it did.
bool remove_socket_file(const std::string& path, const SocketFileIdentity& identity);

}  // namespace ferry::control
