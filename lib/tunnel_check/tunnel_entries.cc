// The hc_tunnels map's entries from the marks and xdp.encap.
#include "lib/tunnel_check/tunnel_entries.hh"

#include <arpa/inet.h>
#include <sys/socket.h>

#include <cstring>
#include <stdexcept>

namespace ferry::tunnel_check {

bpf::ferry_hc_tunnel tunnel_entry(const health::TunnelKey& key, const config::EncapConfig& encap) {
  bool v4 = key.backend.is_v4();
  const auto& source = v4 ? encap.source : encap.source6;
  if (!source) {
    throw std::runtime_error("xdp.encap has no '" + std::string(v4 ? "source" : "source6") +
                             "' for backend " + key.backend.to_string());
  }
  bpf::ferry_hc_tunnel t{};
  t.family = v4 ? AF_INET : AF_INET6;
  t.kind = key.forwarding == config::Forwarding::gue ? bpf::FERRY_HC_GUE : bpf::FERRY_HC_IPIP;
  t.gue_port = t.kind == bpf::FERRY_HC_GUE ? htons(encap.gue_port) : 0;
  std::size_t bytes = v4 ? 4 : 16;
  std::memcpy(t.source, source->bytes.data(), bytes);
  std::memcpy(t.destination, key.backend.bytes.data(), bytes);
  return t;
}

std::map<std::uint32_t, bpf::ferry_hc_tunnel> tunnel_entries(const health::TunnelMarks& marks,
                                                             const config::EncapConfig& encap) {
  std::map<std::uint32_t, bpf::ferry_hc_tunnel> out;
  for (const auto& [key, mark] : marks.marks()) out.emplace(mark, tunnel_entry(key, encap));
  return out;
}

}  // namespace ferry::tunnel_check
