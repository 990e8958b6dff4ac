// ferry-decap's XDP program loaded from its embedded skeleton, with its three maps: counters, the
// config entry (GUE port, attach mode) and the host's local addresses.
#pragma once

#include <map>
#include <string>

#include "bpf/ferry_decap_shared.h"
#include "lib/common/unique_fd.hh"

struct ferry_decap_bpf;  // the bpftool skeleton

namespace ferry::decap {

// The program's maps by their names in bpf/ferry_decap.bpf.c.
inline constexpr const char* counters_map = "decap_counters";
inline constexpr const char* config_map = "decap_config";
inline constexpr const char* local_addrs_map = "local_addrs";
inline constexpr const char* map_names[] = {counters_map, config_map, local_addrs_map};

class DecapProgram {
 public:
  // Opens and loads the embedded object; each map named in `reuse` is that map (an attachment's
  // pinned maps, so a re-attach keeps its counters). Throws std::runtime_error with the reason.
  explicit DecapProgram(const std::map<std::string, int>& reuse = {});
  ~DecapProgram();
  DecapProgram(const DecapProgram&) = delete;
  DecapProgram& operator=(const DecapProgram&) = delete;

  int program_fd() const;
  // The fd of one of map_names, owned by the program.
  int map_fd(const std::string& name) const;

 private:
  ferry_decap_bpf* skeleton_ = nullptr;
};

// The config entry (key 0) of a decap_config map. Throw std::runtime_error.
bpf::ferry_decap_config read_config(int config_fd);
void write_config(int config_fd, const bpf::ferry_decap_config& config);

}  // namespace ferry::decap
