// What the kernel says about a pinned XDP bpf_link.
#pragma once

#include <cstdint>

namespace ferry::decap {

struct LinkFacts {
  std::uint32_t ifindex = 0;  // 0 once the interface is gone (the link is then defunct)
  std::uint32_t program_id = 0;
};

// Throws std::runtime_error when the fd is not an XDP link.
LinkFacts link_facts(int link_fd);

}  // namespace ferry::decap
