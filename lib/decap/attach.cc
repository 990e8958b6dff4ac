// ferry-decap attach and detach: the decap program on an interface through a pinned bpf_link.
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <stdexcept>

#include "lib/common/interface_names.hh"
#include "lib/decap/decap_commands.hh"
#include "lib/decap/decap_program.hh"
#include "lib/decap/interface_pins.hh"
#include "lib/decap/link_info.hh"
#include "lib/decap/local_addresses.hh"

namespace ferry::decap {
namespace {

int link_xdp(int prog_fd, unsigned ifindex, __u32 flags) {
  LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = flags);
  int fd = bpf_link_create(prog_fd, static_cast<int>(ifindex), BPF_XDP, &opts);
  return fd < 0 ? -errno : fd;
}

std::string addresses_note(std::size_t count) {
  return std::to_string(count) + " local address" + (count == 1 ? "" : "es");
}

// A new attachment: native XDP, else generic with a warning; pins made all or none.
void attach_new(const AttachRequest& request, unsigned ifindex, const InterfacePins& pins,
                AttachResult& result) {
  DecapProgram program;
  bpf::ferry_decap_config config{};
  config.gue_port = htons(request.gue_port);
  config.ifindex = ifindex;
  write_config(program.map_fd(config_map), config);
  auto addresses = host_addresses();
  write_local_addresses(program.map_fd(local_addrs_map), addresses);

  int fd = -EINVAL;
  config.mode = bpf::FERRY_DECAP_MODE_NATIVE;
  if (!request.force_generic) {
    fd = link_xdp(program.program_fd(), ifindex, XDP_FLAGS_DRV_MODE);
    if (fd < 0) {
      result.warnings.push_back(request.ifname + ": XDP native mode refused (" +
                                std::strerror(-fd) + "); falling back to generic mode");
    }
  }
  if (fd < 0) {
    config.mode = bpf::FERRY_DECAP_MODE_GENERIC;
    fd = link_xdp(program.program_fd(), ifindex, XDP_FLAGS_SKB_MODE);
  }
  if (fd < 0) {
    std::string hint =
        fd == -EBUSY || fd == -EEXIST
            ? " (another XDP program is attached: `ip link show " + request.ifname + "` shows it)"
            : "";
    throw std::runtime_error(request.ifname + ": attaching XDP failed: " + std::strerror(-fd) +
                             hint);
  }
  UniqueFd link(fd);
  write_config(program.map_fd(config_map), config);

  PinTransaction pinning(pins);
  for (const char* name : map_names) pinning.pin(program.map_fd(name), name);
  pinning.pin(link.get(), link_pin);  // last: a link pin means a whole attachment
  pinning.commit();
  result.notes.push_back(request.ifname + ": attached in " + std::string(mode_name(config.mode)) +
                         " mode, GUE port " + std::to_string(request.gue_port) + ", " +
                         addresses_note(addresses.size()) + ", pinned at " + pins.dir());
}

// An attachment that is already there: a program of this build on the same link (counters
// kept), the new GUE port and the host's addresses as they are now.
void update(const AttachRequest& request, const InterfacePins& pins, const UniqueFd& link,
            AttachResult& result) {
  auto owned = pins.open_maps();
  std::map<std::string, int> reuse;
  for (const auto& [name, fd] : owned) reuse[name] = fd.get();
  DecapProgram program(reuse);
  auto config = read_config(owned.at(config_map).get());
  config.gue_port = htons(request.gue_port);
  write_config(owned.at(config_map).get(), config);
  auto addresses = host_addresses();
  write_local_addresses(owned.at(local_addrs_map).get(), addresses);
  if (bpf_link_update(link.get(), program.program_fd(), nullptr) != 0) {
    throw std::runtime_error(request.ifname +
                             ": swapping the program on its link failed: " + std::strerror(errno));
  }
  result.notes.push_back(request.ifname + ": already attached (" +
                         std::string(mode_name(config.mode)) + " mode); updated: GUE port " +
                         std::to_string(request.gue_port) + ", " +
                         addresses_note(addresses.size()) + ", counters kept");
}

}  // namespace

std::string_view mode_name(std::uint8_t mode) {
  switch (mode) {
    case bpf::FERRY_DECAP_MODE_NATIVE:
      return "native";
    case bpf::FERRY_DECAP_MODE_GENERIC:
      return "generic";
    default:
      return "unknown";
  }
}

AttachResult attach(const AttachRequest& request) {
  check_interface_name(request.ifname);
  if (request.gue_port == 0) throw std::runtime_error("the GUE port must be 1 to 65535");
  unsigned ifindex = if_nametoindex(request.ifname.c_str());
  if (ifindex == 0) throw std::runtime_error(net::no_such_interface(request.ifname));
  AttachResult result;
  if (std::string mounted = ensure_bpffs(request.pin_dir); !mounted.empty()) {
    result.notes.push_back("mounted a bpffs at " + mounted);
  }
  InterfacePins pins(request.pin_dir, request.ifname);
  if (pins.has_link()) {
    UniqueFd link = pins.open(link_pin);
    LinkFacts facts = link_facts(link.get());
    if (facts.ifindex == ifindex) {
      update(request, pins, link, result);
      return result;
    }
    result.notes.push_back(request.ifname + ": removed a stale attachment (its link " +
                           (facts.ifindex == 0 ? std::string("lost its interface")
                                               : "is on ifindex " + std::to_string(facts.ifindex)) +
                           ")");
  }
  if (pins.exists()) pins.remove();
  attach_new(request, ifindex, pins, result);
  return result;
}

std::string detach(const std::string& pin_dir, const std::string& ifname) {
  InterfacePins pins(pin_dir, ifname);
  if (!pins.exists()) {
    throw std::runtime_error(ifname + ": ferry-decap is not attached there (no " + pins.dir() +
                             ")");
  }
  // BPF_LINK_DETACH takes the program off the interface now; dropping the pin alone would leave
  // that to the kernel's deferred release of the link, a moment after this command returns.
  bool had_link = pins.has_link();
  if (had_link) {
    UniqueFd link = pins.open(link_pin);
    if (bpf_link_detach(link.get()) != 0 && errno != ENOLINK) {
      throw std::runtime_error(ifname + ": detaching the link failed: " + std::strerror(errno));
    }
  }
  pins.remove();
  if (pins.exists()) throw std::runtime_error(pins.dir() + ": could not remove the pins");
  ::rmdir(pin_dir.c_str());  // only when empty: other interfaces' pins stay
  return ifname + (had_link ? ": detached" : ": removed an attachment without a link") +
         " (unpinned " + pins.dir() + ")";
}

}  // namespace ferry::decap
