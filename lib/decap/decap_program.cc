// ferry-decap's XDP program loaded from its embedded skeleton.
#include "lib/decap/decap_program.hh"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ferry_decap.skel.h"

namespace ferry::decap {
namespace {

std::string errno_text(int err) {
  return std::strerror(err < 0 ? -err : err);
}

}  // namespace

DecapProgram::DecapProgram(const std::map<std::string, int>& reuse) {
  skeleton_ = ferry_decap_bpf__open();
  if (!skeleton_)
    throw std::runtime_error("opening the decap XDP object failed: " + errno_text(errno));
  int err = 0;
  std::string what = "loading the decap XDP program";
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, skeleton_->obj) {
    auto it = reuse.find(bpf_map__name(map));
    if (it == reuse.end()) continue;
    if ((err = bpf_map__reuse_fd(map, it->second)) != 0) {
      what = std::string("reusing the pinned map ") + bpf_map__name(map) +
             " (made by another version of ferry-decap? detach and attach again)";
      break;
    }
  }
  if (err == 0) err = ferry_decap_bpf__load(skeleton_);
  if (err != 0) {
    ferry_decap_bpf__destroy(skeleton_);
    skeleton_ = nullptr;
    throw std::runtime_error(
        what + " failed: " + errno_text(err) +
        (err == -EPERM || err == EPERM ? " (needs CAP_BPF and CAP_NET_ADMIN)" : ""));
  }
}

DecapProgram::~DecapProgram() {
  ferry_decap_bpf__destroy(skeleton_);
}

int DecapProgram::program_fd() const {
  return bpf_program__fd(skeleton_->progs.ferry_decap);
}

int DecapProgram::map_fd(const std::string& name) const {
  bpf_map* map = bpf_object__find_map_by_name(skeleton_->obj, name.c_str());
  if (!map) throw std::logic_error("the decap XDP object has no map " + name);
  return bpf_map__fd(map);
}

bpf::ferry_decap_config read_config(int config_fd) {
  std::uint32_t key = 0;
  bpf::ferry_decap_config config{};
  if (bpf_map_lookup_elem(config_fd, &key, &config) != 0) {
    throw std::runtime_error("reading the decap config map failed: " + errno_text(errno));
  }
  return config;
}

void write_config(int config_fd, const bpf::ferry_decap_config& config) {
  std::uint32_t key = 0;
  if (bpf_map_update_elem(config_fd, &key, &config, BPF_ANY) != 0) {
    throw std::runtime_error("writing the decap config map failed: " + errno_text(errno));
  }
}

}  // namespace ferry::decap
