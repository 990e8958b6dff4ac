// The UDP services the AF_XDP workers serve: (vip, port, proto) -> service with its backends and
// Maglev table, and (backend ip, port, proto) -> service for replies. Built from the config off
// the hot path, then immutable; workers swap a whole table on reload.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/config/config.hh"
#include "lib/packet/endpoint_map.hh"
#include "lib/packet/flow_hash.hh"
#include "lib/packet/maglev.hh"
#include "lib/packet/parse.hh"

namespace ferry::packet {

enum class ServiceAction : std::uint8_t {
  balance,  // mode "proxy": stateless DNAT to a Maglev-chosen backend
  reflect,  // mode "reflect": swap and send back
};

struct Service {
  std::uint32_t id = 0;  // index in ServiceTable::services()
  std::string name;
  ServiceAction action = ServiceAction::balance;
  net::IpAddress vip;
  std::uint16_t port = 0;
  std::uint8_t protocol = 0;
  std::vector<net::Endpoint> backends;  // config order; Maglev and the reverse map index into it
  std::vector<bool> backend_up;         // same order; down backends are not in `maglev`
  // Same order: the configured weights. Weight 0 backends are not in `maglev` (no new flows) but
  // stay in the reverse map, so their replies are still rewritten.
  std::vector<std::uint32_t> backend_weight;
  MaglevTable maglev;  // over the backends that are up, each by its weight
  // Requests go through the fast-path worker's flow table (affinity "flow", the UDP default) or
  // straight to Maglev ("none").
  bool flow_affinity = true;
  // Flow-table entries of this service last seen before FlowTable::clock_ms() read
  // `flows_reset_ms` are stale: the host had stopped carrying the VIP (withdrawn from the
  // routers), and the host that carried its flows meanwhile may have given them other backends.
  bool flows_reset = false;
  std::uint32_t flows_reset_ms = 0;
};

enum class MatchKind : std::uint8_t {
  none,          // neither to a VIP nor from a backend
  to_service,    // destination is a service's (vip, port, proto)
  from_backend,  // source is a backend's (ip, port, proto): a reply on its way to the client
};

struct ServiceMatch {
  MatchKind kind = MatchKind::none;
  const Service* service = nullptr;
  std::uint32_t backend = 0;  // from_backend: index into service->backends
};

class ServiceTable {
 public:
  ServiceTable() = default;
  ServiceTable(ServiceTable&&) noexcept = default;
  ServiceTable& operator=(ServiceTable&&) noexcept = default;

  // The destination is tried first: a packet to a VIP is a request even if its source happens to
  // be some backend.
  ServiceMatch match(const ParsedPacket& p) const noexcept {
    if (const EndpointTarget* t = by_vip_.find(p.dst_address, p.dst_port, p.protocol, p.version)) {
      return {MatchKind::to_service, &services_[t->service], 0};
    }
    if (const EndpointTarget* t =
            by_backend_.find(p.src_address, p.src_port, p.protocol, p.version)) {
      return {MatchKind::from_backend, &services_[t->service], t->backend};
    }
    return {};
  }
  // The seed of flow_hash() for Maglev lookups; one per table, so every worker agrees.
  std::uint64_t flow_hash_seed() const { return flow_hash_seed_; }
  const std::vector<Service>& services() const { return services_; }

 private:
  friend struct ServiceTableBuilder;
  std::vector<Service> services_;
  EndpointMap by_vip_;
  EndpointMap by_backend_;
  std::uint64_t flow_hash_seed_ = kDefaultFlowHashSeed;
};

struct ServiceTableOptions {
  std::uint32_t maglev_size = MaglevTable::kDefaultSize;  // prime
  std::uint64_t flow_hash_seed = kDefaultFlowHashSeed;
  // Health: backends for which this returns false are left out of their service's Maglev table
  // (their flows, and only theirs, move) but replies from them are still rewritten. Null: all up.
  std::function<bool(const config::ServiceConfig&, const net::Endpoint&)> backend_up;
  // Announcing: when the service's flows were last reset (Service::flows_reset_ms), if ever.
  std::function<std::optional<std::uint32_t>(const config::ServiceConfig&)> flows_reset_ms;
  // The table this one replaces, if any: a service of the same name whose backends, weights and
  // health in the table did not change keeps its Maglev table (shared, not filled again), so a
  // reload or a backend change costs what it changed, not the whole config.
  const ServiceTable* previous = nullptr;
  // Only check that the table can be built (a reload's check before it changes anything): every
  // error is thrown as when building, but no Maglev table is filled.
  bool check_only = false;
};

// Takes the services that have "udp" in protocols and mode proxy or reflect (TCP and echo belong to
// the io_uring runtime). Every policy in `balance` is served by Maglev here: the XDP path keeps no
// per-flow state, so round_robin/least_connections cannot be honoured per packet. Throws
// std::invalid_argument when a table cannot be stateless: one backend (ip, port) in two UDP
// services (a reply from it could not be told apart), a backend of another address family than
// its vip, or a bad maglev_size.
ServiceTable build_service_table(std::span<const config::ServiceConfig> services,
                                 const ServiceTableOptions& options = {});

}  // namespace ferry::packet
