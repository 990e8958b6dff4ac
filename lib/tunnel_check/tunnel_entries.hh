// What the TC program's hc_tunnels map holds: for each tunnel mark, the outer header of the
// backend it names (bpf/ferry_hc_shared.h), as the fast-path worker would write it.
#pragma once

#include <cstdint>
#include <map>

#include "bpf/ferry_hc_shared.h"
#include "lib/config/config.hh"
#include "lib/health/tunnel_marks.hh"

namespace ferry::tunnel_check {

// `key`'s entry: outer family the backend's, source xdp.encap's `source` or `source6`, GUE to
// `gue_port`. Throws std::runtime_error when encap has no source of the backend's family (the
// config refuses that).
bpf::ferry_hc_tunnel tunnel_entry(const health::TunnelKey& key, const config::EncapConfig& encap);
std::map<std::uint32_t, bpf::ferry_hc_tunnel> tunnel_entries(const health::TunnelMarks& marks,
                                                             const config::EncapConfig& encap);

}  // namespace ferry::tunnel_check
