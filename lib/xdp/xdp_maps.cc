// Keeps the XDP program's maps equal to the running configuration.
#include "lib/xdp/xdp_maps.hh"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <stdexcept>
#include <type_traits>

#include "lib/common/interface_names.hh"

namespace ferry::xdp {
namespace {

using bpf::ferry_endpoint_key;
using bpf::ferry_lpm4_key;
using bpf::ferry_lpm6_key;
using bpf::ferry_route_value;
using bpf::ferry_service_value;

ferry_endpoint_key endpoint_key(const net::IpAddress& addr, std::uint16_t port,
                                std::uint8_t proto) {
  ferry_endpoint_key key{};
  key.family = static_cast<std::uint8_t>(addr.family);
  key.proto = proto;
  key.port = htons(port);
  std::memcpy(key.addr, addr.bytes.data(), addr.is_v4() ? 4 : 16);
  return key;
}

template <typename Key>
bool key_less(const Key& a, const Key& b) {
  return std::memcmp(&a, &b, sizeof(Key)) < 0;
}

template <typename Key>
struct KeyLess {
  bool operator()(const Key& a, const Key& b) const { return key_less(a, b); }
};

// The kernel's id of the map behind `fd` (0 if it cannot say): a shadow belongs to one map.
std::uint32_t map_id_of(int fd) {
  bpf_map_info info{};
  std::uint32_t len = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

template <typename T>
std::string bytes_of(const T& value) {
  static_assert(std::has_unique_object_representations_v<T>, "compared byte for byte");
  return std::string(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Writes every wanted (key, value) and deletes every key in the map that is not wanted. With a
// shadow of the map (what the last sync wrote there), only the entries that differ are written
// and only the keys it wrote that are no longer wanted deleted, so a change of one backend among
// thousands costs a few syscalls; without one (the first sync, after a takeover or a failed
// sync), every entry is written and the whole map scanned for stale keys.
template <typename Key, typename Value>
void sync_map(int fd, const std::map<Key, Value, KeyLess<Key>>& wanted, const char* what,
              std::map<std::string, MapShadow>& shadows) {
  const std::uint32_t id = map_id_of(fd);
  auto found = shadows.find(what);
  std::optional<MapShadow> before;
  if (found != shadows.end()) {
    if (id != 0 && found->second.map_id == id) before = std::move(found->second);
    shadows.erase(found);  // unknown until this sync has written everything
  }
  MapShadow after{id, {}};
  for (const auto& [key, value] : wanted) {
    std::string k = bytes_of(key);
    std::string v = bytes_of(value);
    auto was = before ? before->entries.find(k) : std::map<std::string, std::string>::iterator{};
    bool same = before && was != before->entries.end() && was->second == v;
    if (!same && bpf_map_update_elem(fd, &key, &value, BPF_ANY) != 0) {
      throw std::runtime_error(std::string("updating the XDP ") + what +
                               " map: " + std::strerror(errno) +
                               (errno == E2BIG || errno == ENOSPC ? " (too many entries)" : ""));
    }
    if (before && was != before->entries.end()) before->entries.erase(was);
    after.entries.emplace(std::move(k), std::move(v));
  }
  if (before) {
    // What is left of the shadow was written before and is wanted no more.
    for (const auto& entry : before->entries) {
      Key stale{};
      std::memcpy(&stale, entry.first.data(), sizeof(Key));
      bpf_map_delete_elem(fd, &stale);
    }
  } else {
    std::vector<Key> stale;
    Key key{};
    Key next{};
    const Key* cursor = nullptr;
    while (bpf_map_get_next_key(fd, cursor, &next) == 0) {
      if (!wanted.count(next)) stale.push_back(next);
      key = next;
      cursor = &key;
    }
    for (const auto& k : stale) bpf_map_delete_elem(fd, &k);
  }
  if (id != 0) shadows.emplace(what, std::move(after));
}

// Every IPv4 and IPv6 address of the namespace's interfaces (proto and port 0). Addresses added
// later count from the next apply (reload); see docs/health.md.
std::map<ferry_endpoint_key, std::uint32_t, KeyLess<ferry_endpoint_key>> local_addresses() {
  std::map<ferry_endpoint_key, std::uint32_t, KeyLess<ferry_endpoint_key>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr) continue;
    socklen_t len = a->ifa_addr->sa_family == AF_INET    ? sizeof(sockaddr_in)
                    : a->ifa_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6)
                                                         : 0;
    if (len == 0) continue;
    if (auto e = net::Endpoint::from_sockaddr(a->ifa_addr, len)) {
      out[endpoint_key(e->address, 0, 0)] = 1;
    }
  }
  freeifaddrs(list);
  return out;
}

// Whether the health checker sends datagrams to `backend`'s own address and port: their replies
// come from it like replies to clients, and the XDP program must tell them apart.
bool checks_replies_of(const config::ServiceConfig& svc, const net::Endpoint& backend) {
  if (!svc.health) return false;
  auto type = svc.health->type;
  if (type != config::HealthCheckType::udp && type != config::HealthCheckType::dns) return false;
  return svc.health->port.value_or(backend.port) == backend.port;
}

std::vector<std::uint8_t> protos_of(const config::Protocols& p) {
  std::vector<std::uint8_t> out;
  if (p.udp) out.push_back(IPPROTO_UDP);
  if (p.tcp) out.push_back(IPPROTO_TCP);
  return out;
}

}  // namespace

void XdpMapSync::adopt_service_ids(const std::map<std::string, std::uint32_t>& ids) {
  for (const auto& [name, id] : ids) {
    if (id >= id_used_.size() || id_used_[id]) continue;
    id_used_[id] = true;
    service_ids_[name] = id;
  }
}

std::uint32_t XdpMapSync::id_for(const std::string& name) {
  if (auto it = service_ids_.find(name); it != service_ids_.end()) return it->second;
  for (std::uint32_t id = 0; id < id_used_.size(); ++id) {
    if (!id_used_[id]) {
      id_used_[id] = true;
      service_ids_[name] = id;
      return id;
    }
  }
  throw std::runtime_error("more than " + std::to_string(FERRY_MAX_SERVICES) + " services");
}

void XdpMapSync::apply(const XdpMapFds& fds, const config::Config& config) {
  std::map<ferry_endpoint_key, ferry_service_value, KeyLess<ferry_endpoint_key>> services, backends;
  std::map<ferry_endpoint_key, std::uint32_t, KeyLess<ferry_endpoint_key>> udp_hosts;
  std::set<std::string> names;
  for (const auto& svc : config.services) {
    names.insert(svc.name);
    // An encapsulating service's backends answer clients directly: nothing comes back from them
    // through ferry, and its TCP is the workers' too.
    const bool encapsulates = svc.forwarding != config::Forwarding::nat;
    if (svc.protocols.udp) {
      udp_hosts[endpoint_key(svc.vip, 0, IPPROTO_UDP)] |= FERRY_HOST_VIP;
      for (const auto& b : svc.backends) {
        if (!encapsulates) udp_hosts[endpoint_key(b.address, 0, IPPROTO_UDP)] |= FERRY_HOST_BACKEND;
      }
    }
    ferry_service_value value{id_for(svc.name), encapsulates ? FERRY_SERVICE_ENCAP : 0u};
    for (auto proto : protos_of(svc.protocols)) {
      services[endpoint_key(svc.vip, svc.port, proto)] = value;
      for (std::size_t i = 0; !encapsulates && i < svc.backends.size(); ++i) {
        const net::Endpoint& b = svc.backends[i];
        // The index goes to the worker with each reply (ferry_frame_meta); past 16 bits the
        // worker finds the backend itself.
        ferry_service_value backend = value;
        if (i <= 0xffff)
          backend.flags |= static_cast<std::uint32_t>(i) << FERRY_BACKEND_INDEX_SHIFT;
        if (proto == IPPROTO_UDP && checks_replies_of(svc, b)) {
          backend.flags |= FERRY_BACKEND_LOCAL_REPLIES;
        }
        backends[endpoint_key(b.address, b.port, proto)] = backend;
      }
    }
  }
  // Ids of services that are gone are freed for later ones.
  for (auto it = service_ids_.begin(); it != service_ids_.end();) {
    if (names.count(it->first)) {
      ++it;
    } else {
      id_used_[it->second] = false;
      std::vector<bpf::ferry_action_counter> zero(
          static_cast<std::size_t>(libbpf_num_possible_cpus()));
      for (std::uint32_t direction = 0; direction < bpf::FERRY_DIRECTION_COUNT; ++direction) {
        std::uint32_t slot = bpf::ferry_service_slot(it->second, direction);
        bpf_map_update_elem(fds.service_counters, &slot, zero.data(), BPF_ANY);
      }
      it = service_ids_.erase(it);
    }
  }

  std::map<ferry_lpm4_key, std::uint32_t, KeyLess<ferry_lpm4_key>> drop4;
  std::map<ferry_lpm6_key, std::uint32_t, KeyLess<ferry_lpm6_key>> drop6;
  std::uint32_t rule = 0;
  for (const auto& prefix : config.xdp.drop) {
    if (prefix.address.is_v4()) {
      ferry_lpm4_key key{static_cast<std::uint32_t>(prefix.length), {}};
      std::memcpy(key.addr, prefix.address.bytes.data(), 4);
      drop4[key] = rule++;
    } else {
      ferry_lpm6_key key{static_cast<std::uint32_t>(prefix.length), {}};
      std::memcpy(key.addr, prefix.address.bytes.data(), 16);
      drop6[key] = rule++;
    }
  }

  std::map<ferry_lpm4_key, ferry_route_value, KeyLess<ferry_lpm4_key>> routes4;
  std::map<ferry_lpm6_key, ferry_route_value, KeyLess<ferry_lpm6_key>> routes6;
  std::uint32_t route_id = 0;
  for (const auto& route : config.routes) {
    unsigned ifindex = if_nametoindex(route.via.c_str());
    if (ifindex == 0) {
      throw std::runtime_error("routes: " + route.prefix.to_string() + " via " +
                               net::no_such_interface(route.via));
    }
    ferry_route_value value{
        route_id++, ifindex,
        (route.protocols.udp ? FERRY_ROUTE_UDP : 0u) | (route.protocols.tcp ? FERRY_ROUTE_TCP : 0u),
        0};
    if (route.prefix.address.is_v4()) {
      ferry_lpm4_key key{static_cast<std::uint32_t>(route.prefix.length), {}};
      std::memcpy(key.addr, route.prefix.address.bytes.data(), 4);
      routes4[key] = value;
    } else {
      ferry_lpm6_key key{static_cast<std::uint32_t>(route.prefix.length), {}};
      std::memcpy(key.addr, route.prefix.address.bytes.data(), 16);
      routes6[key] = value;
    }
  }

  // Routes and drops first, services last: a new service never sees a half-written drop list.
  sync_map(fds.drop4, drop4, "drop4", shadows_);
  sync_map(fds.drop6, drop6, "drop6", shadows_);
  sync_map(fds.routes4, routes4, "routes4", shadows_);
  sync_map(fds.routes6, routes6, "routes6", shadows_);
  if (fds.local_addrs >= 0) sync_map(fds.local_addrs, local_addresses(), "local_addrs", shadows_);
  if (fds.udp_hosts >= 0) sync_map(fds.udp_hosts, udp_hosts, "udp_hosts", shadows_);
  sync_map(fds.backends, backends, "backends", shadows_);
  sync_map(fds.services, services, "services", shadows_);
}

}  // namespace ferry::xdp
