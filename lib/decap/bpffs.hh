// Finding, or mounting, the bpffs that holds ferry-decap's pins.
#pragma once

#include <string>

namespace ferry::decap {

inline constexpr const char* default_pin_dir = "/sys/fs/bpf/ferry-decap";

bool on_bpffs(const std::string& path);

// Makes `pin_dir` a directory on a bpffs. When neither it nor an existing parent is on one, mounts
// a bpffs at its bpffs root: /sys/fs/bpf for a directory below it, else `pin_dir` itself. Refuses
// (std::runtime_error saying what to do) when that mount would not outlive this process: in a
// mount namespace of its own, as `ip netns exec` gives each command, the mount (and the pinned
// link with it) would go when the command exits. Returns the mount point it mounted, or "".
std::string ensure_bpffs(const std::string& pin_dir);

}  // namespace ferry::decap
