// ferry-decap's three commands: attach the decap program to an interface (a pinned bpf_link),
// detach it, and report every attachment with its counters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bpf/ferry_decap_shared.h"
#include "lib/decap/bpffs.hh"
#include "lib/decap/decap_counters.hh"

namespace ferry::decap {

inline constexpr std::uint16_t default_gue_port = 6080;

struct AttachRequest {
  std::string ifname;
  std::uint16_t gue_port = default_gue_port;
  std::string pin_dir = default_pin_dir;
  bool force_generic = false;  // skip native mode (what a driver without native XDP gets anyway)
};

struct AttachResult {
  std::vector<std::string> notes;     // what happened, one line each, for stdout
  std::vector<std::string> warnings;  // fallbacks the operator may want to know of, for stderr
};

// Throws std::runtime_error with a message that names the interface and what to do.
AttachResult attach(const AttachRequest& request);

// Unpins the attachment to `ifname` (the link's last reference: the program leaves the interface)
// and removes its directory, and PIN_DIR itself when nothing else is left in it. Returns a note.
// Throws std::runtime_error, e.g. when nothing is attached there.
std::string detach(const std::string& pin_dir, const std::string& ifname);

std::string_view mode_name(std::uint8_t mode);

struct InterfaceStatus {
  std::string ifname;         // the directory's name: the interface's when it was attached
  std::uint32_t ifindex = 0;  // 0: the interface is gone and the link with it
  std::uint32_t program_id = 0;
  std::uint8_t mode = bpf::FERRY_DECAP_MODE_UNSET;
  std::uint16_t gue_port = 0;
  std::size_t local_addresses = 0;
  DecapCounters counters{};
  std::string problem;  // why the rest could not be read, if it could not
};

// Every attachment under `pin_dir`, by interface name; none when the directory is missing.
std::vector<InterfaceStatus> status(const std::string& pin_dir);

}  // namespace ferry::decap
