// What the kernel says about a pinned XDP bpf_link.
#include "lib/decap/link_info.hh"

#include <bpf/bpf.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ferry::decap {

LinkFacts link_facts(int link_fd) {
  bpf_link_info info{};
  __u32 length = sizeof info;
  if (bpf_obj_get_info_by_fd(link_fd, &info, &length) != 0) {
    throw std::runtime_error(std::string("reading the link's info failed: ") +
                             std::strerror(errno));
  }
  if (info.type != BPF_LINK_TYPE_XDP) {
    throw std::runtime_error("the pinned link is not an XDP link (type " +
                             std::to_string(info.type) + ")");
  }
  return LinkFacts{info.xdp.ifindex, info.prog_id};
}

}  // namespace ferry::decap
