// ferry's XDP program loaded from its embedded skeleton, and its attachments to interfaces.
#include "lib/xdp/xdp_program.hh"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "ferry.skel.h"
#include "lib/common/env.hh"
#include "lib/common/interface_names.hh"
#include "lib/common/log.hh"

namespace ferry::xdp {
namespace {

std::string errno_text(int err) {
  return std::strerror(err < 0 ? -err : err);
}

int link_xdp(int prog_fd, int ifindex, __u32 flags) {
  LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = flags);
  int fd = bpf_link_create(prog_fd, ifindex, BPF_XDP, &opts);
  return fd < 0 ? -errno : fd;
}

// One eBPF instruction without a source register or offset.
bpf_insn instruction(std::uint8_t code, std::uint8_t dst, std::int32_t imm) {
  bpf_insn i{};
  i.code = code;
  i.dst_reg = dst & 0xf;
  i.imm = imm;
  return i;
}

// Loads the smallest XDP program that calls bpf_xdp_adjust_meta: 0 when the kernel takes it, else
// the errno. (libbpf 1.1's libbpf_probe_bpf_helper answers "supported" to the newer verifiers'
// "program of this type cannot use helper", so it cannot tell.)
int probe_adjust_meta() {
  const bpf_insn insns[] = {
      instruction(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, -8),  // r1 is the ctx
      instruction(BPF_JMP | BPF_CALL, 0, BPF_FUNC_xdp_adjust_meta),
      instruction(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, XDP_PASS),
      instruction(BPF_JMP | BPF_EXIT, 0, 0),
  };
  const int fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "ferry_probe", "GPL", insns,
                               sizeof(insns) / sizeof(insns[0]), nullptr);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// Whether the program may pass its match in the XDP metadata area: the kernel's verifier must let
// XDP programs call bpf_xdp_adjust_meta (some kernels refuse it, as some drivers refuse the call
// at run time), and FERRY_XDP_NO_METADATA=1 turns it off to test the workers' own matching.
bool metadata_usable() {
  if (env_flag("FERRY_XDP_NO_METADATA")) {
    log::info(
        "XDP metadata off (FERRY_XDP_NO_METADATA=1): the workers match every frame themselves");
    return false;
  }
  const int err = probe_adjust_meta();
  if (err == 0) return true;
  static bool said = false;  // once per process: a handover or a reload loads the program again
  if (!said) {
    said = true;
    log::warning(
        "this kernel does not let XDP programs call bpf_xdp_adjust_meta ({}): the XDP "
        "program passes no match to the workers, which match every frame themselves",
        errno_text(err));
  }
  return false;
}

}  // namespace

std::string_view to_string(AttachMode mode) {
  return mode == AttachMode::native ? "native" : "generic";
}

XdpAttachment::XdpAttachment(std::string ifname, int ifindex, AttachMode mode, UniqueFd link)
    : ifname_(std::move(ifname)), ifindex_(ifindex), mode_(mode), link_(std::move(link)) {}

void XdpAttachment::run(int program_fd) const {
  if (bpf_link_update(link_.get(), program_fd, nullptr) != 0) {
    throw std::runtime_error(ifname_ +
                             ": swapping the XDP program on its link failed: " + errno_text(errno));
  }
}

XdpProgram::XdpProgram(const SharedMaps* reuse) {
  skeleton_ = ferry_bpf__open();
  int err = skeleton_ ? 0 : errno;
  if (skeleton_ && reuse) {
    bpf_map* map = nullptr;
    bpf_object__for_each_map(map, skeleton_->obj) {
      if (bpf_map__is_internal(map)) continue;
      auto it = reuse->find(bpf_map__name(map));
      if (it == reuse->end()) continue;  // a map the predecessor did not have starts empty
      if (int e = bpf_map__reuse_fd(map, it->second.get()); e != 0) {
        std::string name = bpf_map__name(map);
        ferry_bpf__destroy(skeleton_);
        skeleton_ = nullptr;
        throw std::runtime_error("the XDP map " + name +
                                 " of this ferryd differs from the running one's (" +
                                 errno_text(e) + "): a handover cannot keep it; restart instead");
      }
    }
  }
  if (skeleton_) {
    passes_metadata_ = metadata_usable();
    skeleton_->rodata->pass_metadata = passes_metadata_ ? 1 : 0;
  }
  if (skeleton_ && (err = ferry_bpf__load(skeleton_)) != 0) {
    ferry_bpf__destroy(skeleton_);
    skeleton_ = nullptr;
    err = err < 0 ? -err : err;
  }
  if (!skeleton_) {
    throw std::runtime_error("loading the XDP program failed: " + errno_text(err) +
                             (err == EPERM ? " (ferryd needs CAP_BPF and CAP_NET_ADMIN)" : ""));
  }
}

std::map<std::string, int> XdpProgram::shared_map_fds() const {
  std::map<std::string, int> out;
  bpf_map* map = nullptr;
  bpf_object__for_each_map(map, skeleton_->obj) {
    if (!bpf_map__is_internal(map)) out[bpf_map__name(map)] = bpf_map__fd(map);
  }
  return out;
}

XdpProgram::~XdpProgram() {
  ferry_bpf__destroy(skeleton_);
}

int XdpProgram::program_fd() const {
  return bpf_program__fd(skeleton_->progs.ferry_xdp);
}

std::unique_ptr<XdpAttachment> XdpProgram::attach(const config::XdpInterfaceConfig& iface) const {
  unsigned ifindex = if_nametoindex(iface.name.c_str());
  if (ifindex == 0) {
    throw std::runtime_error("xdp.interfaces: " + net::no_such_interface(iface.name));
  }
  int fd = -EINVAL;
  AttachMode mode = AttachMode::native;
  if (iface.mode != config::XdpMode::generic) {
    fd = link_xdp(program_fd(), static_cast<int>(ifindex), XDP_FLAGS_DRV_MODE);
    if (fd < 0 && iface.mode == config::XdpMode::native) {
      throw std::runtime_error(iface.name + ": attaching XDP in native mode failed: " +
                               errno_text(fd) + " (set xdp.interfaces[].mode to \"auto\" or " +
                               "\"generic\" if the driver has no native XDP)");
    }
    if (fd < 0) {
      log::warning(
          "{}: XDP native mode not supported by the driver? ({}); falling back to generic "
          "(set xdp.interfaces[].mode to \"generic\" to silence)",
          iface.name, errno_text(fd));
    }
  }
  if (fd < 0) {
    mode = AttachMode::generic;
    fd = link_xdp(program_fd(), static_cast<int>(ifindex), XDP_FLAGS_SKB_MODE);
    if (fd < 0) {
      std::string hint = fd == -EBUSY || fd == -EEXIST
                             ? " (another XDP program is attached: is another ferryd running? "
                               "`ip link show " +
                                   iface.name + "` shows it)"
                             : "";
      throw std::runtime_error(iface.name + ": attaching XDP failed: " + errno_text(fd) + hint);
    }
  }
  log::info("{}: XDP program attached in {} mode (ifindex {})", iface.name, to_string(mode),
            ifindex);
  auto attachment =
      std::make_unique<XdpAttachment>(iface.name, static_cast<int>(ifindex), mode, UniqueFd(fd));
  attachment->set_requested(iface.mode);
  return attachment;
}

namespace {

ActionTotals sum_per_cpu(int map_fd, std::uint32_t slot) {
  ActionTotals total;
  int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return total;
  std::vector<bpf::ferry_action_counter> per_cpu(static_cast<std::size_t>(cpus));
  if (bpf_map_lookup_elem(map_fd, &slot, per_cpu.data()) != 0) return total;
  for (const auto& c : per_cpu) {
    total.packets += c.packets;
    total.bytes += c.bytes;
  }
  return total;
}

}  // namespace

std::array<ActionTotals, bpf::FERRY_ACTION_COUNT> XdpProgram::read_action_totals() const {
  std::array<ActionTotals, bpf::FERRY_ACTION_COUNT> totals{};
  int map_fd = bpf_map__fd(skeleton_->maps.action_counters);
  for (std::uint32_t action = 0; action < bpf::FERRY_ACTION_COUNT; ++action) {
    totals[action] = sum_per_cpu(map_fd, action);
  }
  return totals;
}

ActionTotals XdpProgram::read_service_totals(std::uint32_t service_id,
                                             std::uint32_t direction) const {
  return sum_per_cpu(bpf_map__fd(skeleton_->maps.service_counters),
                     bpf::ferry_service_slot(service_id, direction));
}

XdpMapFds XdpProgram::map_fds() const {
  const auto& m = skeleton_->maps;
  XdpMapFds fds;
  fds.services = bpf_map__fd(m.services);
  fds.backends = bpf_map__fd(m.backends);
  fds.local_addrs = bpf_map__fd(m.local_addrs);
  fds.udp_hosts = bpf_map__fd(m.udp_hosts);
  fds.drop4 = bpf_map__fd(m.drop4);
  fds.drop6 = bpf_map__fd(m.drop6);
  fds.routes4 = bpf_map__fd(m.routes4);
  fds.routes6 = bpf_map__fd(m.routes6);
  fds.service_counters = bpf_map__fd(m.service_counters);
  fds.ifslots = bpf_map__fd(m.ifslots);
  fds.xsks = bpf_map__fd(m.xsks);
  return fds;
}

}  // namespace ferry::xdp
