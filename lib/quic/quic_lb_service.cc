// QuicLbService: the header, the codepoint, the codec, the server ID map, in that order; the
// first step that fails names the fallback reason.
#include "lib/quic/quic_lb_service.hh"

#include <fmt/format.h>

#include <stdexcept>
#include <vector>

namespace ferry::quic {

std::string_view to_string(QuicLbOutcome outcome) {
  switch (outcome) {
    case QuicLbOutcome::routed:
      return "routed";
    case QuicLbOutcome::not_quic:
      return "not_quic";
    case QuicLbOutcome::truncated_header:
      return "truncated_header";
    case QuicLbOutcome::version_negotiation:
      return "version_negotiation";
    case QuicLbOutcome::dcid_too_long:
      return "dcid_too_long";
    case QuicLbOutcome::unroutable_codepoint:
      return "unroutable_codepoint";
    case QuicLbOutcome::unknown_config:
      return "unknown_config";
    case QuicLbOutcome::cid_too_short:
      return "cid_too_short";
    case QuicLbOutcome::unknown_server_id:
      return "unknown_server_id";
    case QuicLbOutcome::backend_unusable:
      return "backend_unusable";
  }
  return "unknown";
}

namespace {

ServerIdMap build_map(std::span<const LbConfig> configs, std::span<const ServerIdEntry> servers) {
  for (const auto& s : servers) {
    bool fits = false;
    for (const auto& c : configs) fits = fits || c.server_id_bytes == s.length;
    if (!fits) {
      throw std::invalid_argument(fmt::format(
          "a server ID of {} octets fits no configuration's server_id_bytes", s.length));
    }
  }
  return ServerIdMap(servers);
}

}  // namespace

QuicLbService::QuicLbService(std::span<const LbConfig> configs,
                             std::span<const ServerIdEntry> servers, AesEngine engine)
    : servers_(build_map(configs, servers)) {
  for (const auto& c : configs) {
    if (c.config_id < kConfigIdCount && codecs_[c.config_id]) {
      throw std::invalid_argument(fmt::format("two configurations with id {}", c.config_id));
    }
    CidCodec codec(c, engine);  // checks the bounds, config_id included
    codecs_[c.config_id].emplace(codec);
  }
}

QuicLbRoute QuicLbService::route(std::span<const std::uint8_t> udp_payload) const noexcept {
  QuicHeader h = parse_quic_header(udp_payload);
  QuicLbRoute r;
  switch (h.status) {
    case HeaderStatus::ok:
      return route_dcid(h.dcid);
    case HeaderStatus::not_quic:
      r.outcome = QuicLbOutcome::not_quic;
      break;
    case HeaderStatus::truncated:
      r.outcome = QuicLbOutcome::truncated_header;
      break;
    case HeaderStatus::version_negotiation:
      r.outcome = QuicLbOutcome::version_negotiation;
      break;
    case HeaderStatus::dcid_too_long:
      r.outcome = QuicLbOutcome::dcid_too_long;
      break;
  }
  return r;
}

QuicLbRoute QuicLbService::route_dcid(std::span<const std::uint8_t> dcid) const noexcept {
  QuicLbRoute r;
  if (dcid.empty()) {
    r.outcome = QuicLbOutcome::cid_too_short;
    return r;
  }
  r.config_id = config_id_of(dcid[0]);
  if (r.config_id == kUnroutableConfigId) {
    r.outcome = QuicLbOutcome::unroutable_codepoint;
    return r;
  }
  const auto& codec = codecs_[r.config_id];
  if (!codec) {
    r.outcome = QuicLbOutcome::unknown_config;
    return r;
  }
  if (dcid.size() < codec->cid_bytes()) {
    r.outcome = QuicLbOutcome::cid_too_short;
    return r;
  }
  std::uint8_t server_id[kMaxServerIdBytes];
  codec->decode(dcid.data(), server_id);
  r.backend = servers_.find(server_id, codec->server_id_bytes());
  r.outcome = r.backend == QuicLbRoute::kNoBackend ? QuicLbOutcome::unknown_server_id
                                                   : QuicLbOutcome::routed;
  return r;
}

}  // namespace ferry::quic
