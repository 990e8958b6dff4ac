// Building a ServiceTable from the configured services.
#include "lib/packet/service_table.hh"

#include <array>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace ferry::packet {

struct ServiceTableBuilder {
  static ServiceTable build(std::span<const config::ServiceConfig> configs,
                            const ServiceTableOptions& options);
};

namespace {

EndpointKey key_of(const net::IpAddress& address, std::uint16_t port, std::uint8_t protocol) {
  return {address.bytes, port, protocol, address.is_v4() ? IpVersion::v4 : IpVersion::v6};
}

// The service's QUIC-LB decoder: its configurations (key schedules expanded here) and the server
// ID of each backend that has one, by the backend's index in the configured order.
std::shared_ptr<const quic::QuicLbService> quic_lb_of(const config::ServiceConfig& c,
                                                      quic::AesEngine engine) {
  if (!c.quic_lb) return nullptr;
  std::vector<quic::LbConfig> configs;
  for (const config::QuicLbConfigEntry& e : c.quic_lb->configs) {
    configs.push_back({e.id, e.server_id_bytes, e.nonce_bytes, e.key});
  }
  std::vector<quic::ServerIdEntry> servers;
  for (std::size_t i = 0; i < c.backends.size(); ++i) {
    if (const config::ServerId* id = c.server_id(i)) {
      servers.push_back(quic::ServerIdEntry::make(*id, static_cast<std::uint32_t>(i)));
    }
  }
  try {
    return std::make_shared<const quic::QuicLbService>(configs, servers, engine);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("service " + c.name + ": quic_lb: " + e.what());
  }
}

}  // namespace

ServiceTable ServiceTableBuilder::build(std::span<const config::ServiceConfig> configs,
                                        const ServiceTableOptions& options) {
  if (!is_prime(options.maglev_size)) {
    throw std::invalid_argument("maglev table size " + std::to_string(options.maglev_size) +
                                " is not prime");
  }
  ServiceTable table;
  table.flow_hash_seed_ = options.flow_hash_seed;
  std::unordered_map<std::string_view, const MaglevTable*> previous;
  if (options.previous != nullptr) {
    for (const Service& s : options.previous->services_) previous.emplace(s.name, &s.maglev);
  }
  const MaglevTable none;
  for (const config::ServiceConfig& c : configs) {
    const bool encapsulates = c.forwarding != config::Forwarding::nat;
    if (!c.protocols.udp && !(encapsulates && c.protocols.tcp)) continue;
    if (c.mode != config::ServiceMode::proxy && c.mode != config::ServiceMode::reflect) continue;
    Service s;
    s.id = static_cast<std::uint32_t>(table.services_.size());
    s.name = c.name;
    s.action =
        c.mode == config::ServiceMode::proxy ? ServiceAction::balance : ServiceAction::reflect;
    s.vip = c.vip;
    s.port = c.port;
    s.protocol = c.protocols.udp ? IPPROTO_UDP : IPPROTO_TCP;
    if (encapsulates && c.mode == config::ServiceMode::proxy) {
      s.forwarding = c.forwarding;
      s.takes_tcp = c.protocols.udp && c.protocols.tcp;
    }
    s.flow_affinity = c.affinity == config::Affinity::flow;
    if (auto reset = options.flows_reset_ms ? options.flows_reset_ms(c) : std::nullopt) {
      s.flows_reset = true;
      s.flows_reset_ms = *reset;
    }
    if (s.action == ServiceAction::balance) {
      s.backends = c.backends;
      s.quic_lb = quic_lb_of(c, options.aes_engine);
    }
    if (s.backends.size() >= MaglevTable::kNoBackend) {
      throw std::invalid_argument("service " + c.name + ": more than 65534 backends");
    }

    std::vector<std::string> names;
    names.reserve(s.backends.size());
    for (const net::Endpoint& b : s.backends) {
      if (b.address.family != c.vip.family) {
        throw std::invalid_argument("service " + c.name + ": backend " + b.to_string() +
                                    " is not of the vip's address family");
      }
      bool up = !options.backend_up || options.backend_up(c, b);
      s.backend_up.push_back(up);
      s.backend_weight.push_back(c.weight(s.backend_weight.size()));
      names.push_back(b.to_string());
      if (options.counter_slot && !options.check_only) {
        s.counter_slots.push_back(options.counter_slot(c, b));
      }
    }
    std::vector<MaglevBackend> in_table;
    for (std::size_t i = 0; i < s.backends.size(); ++i) {
      if (s.backend_up[i] && s.backend_weight[i] > 0) {
        in_table.push_back({names[i], static_cast<std::uint16_t>(i), s.backend_weight[i]});
      }
    }
    if (options.check_only) {
      MaglevTable::check(in_table, options.maglev_size);
    } else {
      auto before = previous.find(c.name);
      s.maglev = MaglevTable::build(in_table, options.maglev_size,
                                    before == previous.end() ? none : *before->second);
    }

    const std::array<std::uint8_t, 2> protocols{s.protocol, IPPROTO_TCP};
    for (std::size_t k = 0; k < (s.takes_tcp ? 2u : 1u); ++k) {
      const std::uint8_t protocol = protocols[k];
      if (!table.by_vip_.insert(key_of(s.vip, s.port, protocol), {s.id, 0})) {
        throw std::invalid_argument(
            "service " + c.name + ": " + (protocol == IPPROTO_UDP ? "udp " : "tcp ") +
            net::Endpoint{s.vip, s.port}.to_string() + " is already served by another service");
      }
    }
    // An encapsulating service's backends answer clients directly: no reply to match.
    for (std::size_t i = 0; !s.encapsulates() && i < s.backends.size(); ++i) {
      const net::Endpoint& b = s.backends[i];
      EndpointKey key = key_of(b.address, b.port, s.protocol);
      if (!table.by_backend_.insert(key, {s.id, static_cast<std::uint32_t>(i)})) {
        std::uint32_t owner = table.by_backend_.find(key)->service;
        throw std::invalid_argument(
            "service " + c.name + ": backend " + b.to_string() + " (udp) already serves service " +
            (owner == s.id ? c.name : table.services_[owner].name) +
            "; replies from it could not be told apart without per-flow state, so give each "
            "service its own backend address or port");
      }
    }
    if (auto id =
            options.steering_id && !options.check_only ? options.steering_id(c) : std::nullopt;
        id && *id <= 0xffff) {
      if (table.by_steering_id_.size() <= *id) table.by_steering_id_.resize(*id + 1, ~0u);
      table.by_steering_id_[*id] = s.id;
    }
    table.services_.push_back(std::move(s));
  }
  return table;
}

ServiceTable build_service_table(std::span<const config::ServiceConfig> services,
                                 const ServiceTableOptions& options) {
  return ServiceTableBuilder::build(services, options);
}

}  // namespace ferry::packet
