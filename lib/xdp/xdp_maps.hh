// Keeps the XDP program's maps (services, backends, routes, drop prefixes) equal to the running
// configuration: on every apply, new and changed entries are written and stale ones deleted (by
// difference with what the last apply wrote), so a reload never detaches the program or leaves a
// window with an empty map, and a change of one backend writes one entry, not thousands.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bpf/ferry_shared.h"
#include "lib/config/config.hh"

namespace ferry::xdp {

struct XdpMapFds {
  int services = -1;
  int backends = -1;
  int local_addrs = -1;  // the namespace's own addresses, read at every apply
  int udp_hosts = -1;    // UDP services' VIPs and backends by address, for later fragments
  int drop4 = -1;
  int drop6 = -1;
  int routes4 = -1;
  int routes6 = -1;
  int service_counters = -1;
  // Written by the AF_XDP fast path, not by XdpMapSync: ifindex -> slot, and
  // ferry_xsk_key(slot, queue) -> AF_XDP socket.
  int ifslots = -1;
  int xsks = -1;
};

// What XdpMapSync last wrote into one map, byte for byte, and that map's kernel id.
struct MapShadow {
  std::uint32_t map_id = 0;
  std::map<std::string, std::string> entries;  // key bytes -> value bytes
};

class XdpMapSync {
 public:
  // Writes the maps for `config`. Throws std::runtime_error (map full, unknown egress interface)
  // after having written what it could; the caller re-applies the previous config to roll back.
  void apply(const XdpMapFds& fds, const config::Config& config);

  // A handover: the predecessor's ids, so its counter slots stay with the same services.
  void adopt_service_ids(const std::map<std::string, std::uint32_t>& ids);
  // Stable per-name service ids (slots of service_counters), kept across reloads.
  const std::map<std::string, std::uint32_t>& service_ids() const { return service_ids_; }
  // The id of service `name`, given now if it has none: the fast path's tables, built before the
  // maps are written, know the id the maps will carry. apply() frees it if the name is not in
  // the config it writes. Throws std::runtime_error past FERRY_MAX_SERVICES.
  std::uint32_t id_for(const std::string& name);

 private:
  std::map<std::string, std::uint32_t> service_ids_;
  // Per map (by name), what the last apply wrote: the next writes only the difference. Dropped
  // for a map whose sync failed, so the next apply writes it whole again.
  std::map<std::string, MapShadow> shadows_;
  std::vector<bool> id_used_ = std::vector<bool>(FERRY_MAX_SERVICES, false);
};

}  // namespace ferry::xdp
