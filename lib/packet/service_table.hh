// The UDP services the AF_XDP workers serve: (vip, port, proto) -> service with its backends and
// Maglev table, and (backend ip, port, proto) -> service for replies. Built from the config off
// the hot path, then immutable; workers swap a whole table on reload.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
#include "lib/quic/quic_lb_service.hh"

namespace ferry::packet {

// A backend without a slot in the fast path's per-backend counters (Service::counter_slots).
inline constexpr std::uint32_t kNoCounterSlot = ~0u;

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
  // Same order: the slot of each backend in the fast-path workers' per-backend counters
  // (ServiceTableOptions::counter_slot), or kNoCounterSlot; empty when nothing assigns them.
  std::vector<std::uint32_t> counter_slots;
  std::uint32_t counter_slot(std::size_t backend) const noexcept {
    return backend < counter_slots.size() ? counter_slots[backend] : kNoCounterSlot;
  }
  // Requests go through the fast-path worker's flow table (affinity "flow", the UDP default) or
  // straight to Maglev ("none").
  bool flow_affinity = true;
  // Flow-table entries of this service last seen before FlowTable::clock_ms() read
  // `flows_reset_ms` are stale: the host had stopped carrying the VIP (withdrawn from the
  // routers), and the host that carried its flows meanwhile may have given them other backends.
  bool flows_reset = false;
  std::uint32_t flows_reset_ms = 0;
  // Direct server return (config "forwarding" ipip or gue): requests are sent unchanged inside an
  // outer header to the chosen backend, which answers the client itself; such a service has no
  // replies to rewrite (its backends are not in the reply map) and may take TCP as well as UDP
  // (`takes_tcp`: TCP to the VIP and port is balanced per packet, never terminated).
  config::Forwarding forwarding = config::Forwarding::nat;
  bool takes_tcp = false;
  bool encapsulates() const { return forwarding != config::Forwarding::nat; }
  // QUIC-LB (config "quic_lb"): requests whose connection ID names a backend's server ID go to that
  // backend while it is up (drained included), whatever their 4-tuple. Null: off. Its key
  // schedules are computed when the table is built, never per packet.
  std::shared_ptr<const quic::QuicLbService> quic_lb;
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
  bool hinted = false;        // taken from the XDP program's hint (match(p, hint)), not looked up
};

// What the XDP program decided for a frame it steered (bpf/ferry_shared.h ferry_frame_meta, read
// by the worker): the service by its steering id (the per-name id of the XDP maps) and, for a
// reply, its backend's index in the service's configured backends. A hint: see match(p, hint).
struct MatchHint {
  MatchKind kind = MatchKind::none;
  std::uint16_t steering_id = 0;
  std::uint16_t backend = 0;
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
  // match() with the XDP program's decision: the hinted service, when the frame is what the hint
  // says (to its VIP and port, or from that backend), at the cost of a comparison instead of a
  // lookup. Without a hint, or when the hint does not hold (the XDP maps and this table belong to
  // different configs for a moment during a reload, or an older program wrote no decision),
  // match(p): the answer is always this table's.
  ServiceMatch match(const ParsedPacket& p, const MatchHint& hint) const noexcept {
    if (hint.kind != MatchKind::none && hint.steering_id < by_steering_id_.size()) {
      std::uint32_t index = by_steering_id_[hint.steering_id];
      if (index < services_.size()) {
        const Service& s = services_[index];
        if (hint.kind == MatchKind::to_service) {
          if (is_vip_of(s, p)) {
            return {MatchKind::to_service, &s, 0, true};
          }
        } else if (hint.backend < s.backends.size()) {
          const net::Endpoint& b = s.backends[hint.backend];
          if (is_endpoint(b.address, b.port, s.protocol, p.src_address, p.src_port, p)) {
            return {MatchKind::from_backend, &s, hint.backend, true};
          }
        }
      }
    }
    return match(p);
  }
  // The seed of flow_hash() for Maglev lookups; one per table, so every worker agrees.
  std::uint64_t flow_hash_seed() const { return flow_hash_seed_; }
  const std::vector<Service>& services() const { return services_; }

 private:
  friend struct ServiceTableBuilder;
  static bool is_endpoint(const net::IpAddress& address, std::uint16_t port, std::uint8_t protocol,
                          const std::array<std::uint8_t, 16>& p_address, std::uint16_t p_port,
                          const ParsedPacket& p) noexcept {
    return port == p_port && protocol == p.protocol && address.is_v4() == p.is_v4() &&
           address.bytes == p_address;
  }
  static bool is_vip_of(const Service& s, const ParsedPacket& p) noexcept {
    return is_endpoint(s.vip, s.port, s.protocol, p.dst_address, p.dst_port, p) ||
           (s.takes_tcp && is_endpoint(s.vip, s.port, IPPROTO_TCP, p.dst_address, p.dst_port, p));
  }
  std::vector<Service> services_;
  // steering id -> index in services_ (or past its end: no service of this table has that id).
  std::vector<std::uint32_t> by_steering_id_;
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
  // The XDP maps' steering id of a service (the id the XDP program passes with its frames in
  // ferry_frame_meta), if it has one: ServiceTable::match(p, hint) takes the hinted service by it.
  // Null: no hints are taken (every frame is matched).
  std::function<std::optional<std::uint32_t>(const config::ServiceConfig&)> steering_id;
  // The slot of a balanced service's backend in the fast-path workers' per-backend counters (asked
  // once per backend of every balanced service the table takes, in the configured order), or
  // kNoCounterSlot. Null: none (Service::counter_slots stays empty).
  std::function<std::uint32_t(const config::ServiceConfig&, const net::Endpoint&)> counter_slot;
  // The AES code of QUIC-LB services' decoders (quic::choose_aes_engine(): AES-NI where the CPU
  // has it, unless FERRY_QUIC_AESNI=0).
  quic::AesEngine aes_engine = quic::choose_aes_engine();
  // Only check that the table can be built (a reload's check before it changes anything): every
  // error is thrown as when building, but no Maglev table is filled.
  bool check_only = false;
};

// Takes the services that have "udp" in protocols and mode proxy or reflect (TCP and echo belong to
// the io_uring runtime), and the encapsulating ones (forwarding ipip or gue) with their TCP too.
// Every policy in `balance` is served by Maglev here: the XDP path keeps no per-flow state, so
// round_robin/least_connections cannot be honoured per packet. Throws std::invalid_argument when a
// table cannot be stateless: one backend (ip, port) in two UDP services (a reply from it could not
// be told apart), a backend of another address family than its vip, or a bad maglev_size.
// Encapsulating services may share backends with any service: no reply of theirs comes back through
// ferry.
ServiceTable build_service_table(std::span<const config::ServiceConfig> services,
                                 const ServiceTableOptions& options = {});

}  // namespace ferry::packet
