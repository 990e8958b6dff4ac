// ferry's XDP program loaded from its embedded skeleton, and its attachments to interfaces.
// Each attachment is a bpf_link: the kernel detaches the program when the daemon exits, even on
// SIGKILL, because the link's last reference dies with the process.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bpf/ferry_shared.h"
#include "lib/common/unique_fd.hh"
#include "lib/config/config.hh"
#include "lib/xdp/xdp_maps.hh"

struct ferry_bpf;  // the bpftool skeleton

namespace ferry::xdp {

// How the program actually runs on an interface.
enum class AttachMode { native, generic };
std::string_view to_string(AttachMode mode);

// One bpf_link between the program and an interface. Closing the link fd detaches, unless another
// process holds the link too (a handover).
class XdpAttachment {
 public:
  XdpAttachment(std::string ifname, int ifindex, AttachMode mode, UniqueFd link);
  int link_fd() const { return link_.get(); }
  // Runs `program_fd` on this link from now on, atomically (BPF_LINK_UPDATE): no frame sees the
  // interface without a program. Throws std::runtime_error.
  void run(int program_fd) const;
  const std::string& ifname() const { return ifname_; }
  int ifindex() const { return ifindex_; }
  AttachMode mode() const { return mode_; }
  config::XdpMode requested() const { return requested_; }
  void set_requested(config::XdpMode m) { requested_ = m; }

 private:
  std::string ifname_;
  int ifindex_;
  AttachMode mode_;
  config::XdpMode requested_ = config::XdpMode::automatic;
  UniqueFd link_;
};

struct ActionTotals {
  std::uint64_t packets = 0;
  std::uint64_t bytes = 0;
};

// The maps a running program shares with its successor (a handover), by name: every map but
// libbpf's internal ones (.rodata, .bss), which belong to one build of the program.
using SharedMaps = std::map<std::string, UniqueFd>;

class XdpProgram {
 public:
  // Opens and loads the embedded object. Throws std::runtime_error with the libbpf reason.
  // With `reuse`, each of the object's maps named there is that map (bpf_map__reuse_fd), so the
  // entries, the XSKMAP's sockets and the counters are the predecessor's; libbpf refuses a map
  // whose type or sizes differ, and so does this constructor, naming it.
  explicit XdpProgram(const SharedMaps* reuse = nullptr);
  ~XdpProgram();
  XdpProgram(const XdpProgram&) = delete;
  XdpProgram& operator=(const XdpProgram&) = delete;

  // Attaches to `iface.name` through a bpf_link. automatic: native, falling back to generic with a
  // warning when the driver refuses. Throws std::runtime_error naming the interface and what to do.
  std::unique_ptr<XdpAttachment> attach(const config::XdpInterfaceConfig& iface) const;

  // Sums the per-CPU counter slots.
  std::array<ActionTotals, bpf::FERRY_ACTION_COUNT> read_action_totals() const;
  // Frames matched to one service in one direction (bpf::ferry_direction), summed over CPUs.
  ActionTotals read_service_totals(std::uint32_t service_id, std::uint32_t direction) const;
  int program_fd() const;
  XdpMapFds map_fds() const;
  // Every shared map (see SharedMaps) with its fd, owned by the program.
  std::map<std::string, int> shared_map_fds() const;
  // Whether the program passes its match to the workers in the XDP metadata area
  // (docs/fastpath.md): false on a kernel that refuses bpf_xdp_adjust_meta to XDP programs, or with
  // FERRY_XDP_NO_METADATA=1.
  bool passes_metadata() const { return passes_metadata_; }

 private:
  ferry_bpf* skeleton_ = nullptr;
  bool passes_metadata_ = false;
};

}  // namespace ferry::xdp
