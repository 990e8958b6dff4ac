// The version-independent part of a QUIC header: form, version and DCID.
#include "lib/quic/quic_header.hh"

#include <algorithm>

#include "lib/quic/lb_config.hh"

namespace ferry::quic {

std::string_view to_string(HeaderStatus status) {
  switch (status) {
    case HeaderStatus::ok:
      return "ok";
    case HeaderStatus::not_quic:
      return "not_quic";
    case HeaderStatus::truncated:
      return "truncated";
    case HeaderStatus::version_negotiation:
      return "version_negotiation";
    case HeaderStatus::dcid_too_long:
      return "dcid_too_long";
  }
  return "unknown";
}

QuicHeader parse_quic_header(std::span<const std::uint8_t> payload) noexcept {
  QuicHeader h;
  if (payload.empty()) return h;
  if ((payload[0] & kLongHeaderBit) == 0) {
    h.form = HeaderForm::short_header;
    h.status = HeaderStatus::ok;
    h.dcid = payload.subspan(kShortHeaderDcidOffset,
                             std::min(payload.size() - kShortHeaderDcidOffset, kMaxCidBytes));
    return h;
  }
  h.form = HeaderForm::long_header;
  if (payload.size() < kLongHeaderDcidOffset) {
    h.status = HeaderStatus::truncated;
    return h;
  }
  h.version = (std::uint32_t{payload[1]} << 24) | (std::uint32_t{payload[2]} << 16) |
              (std::uint32_t{payload[3]} << 8) | std::uint32_t{payload[4]};
  const std::size_t dcid_bytes = payload[5];
  if (h.version == 0) {
    h.status = HeaderStatus::version_negotiation;
    return h;
  }
  if (dcid_bytes > kMaxCidBytes) {
    h.status = HeaderStatus::dcid_too_long;
    return h;
  }
  if (payload.size() - kLongHeaderDcidOffset < dcid_bytes) {
    h.status = HeaderStatus::truncated;
    return h;
  }
  h.status = HeaderStatus::ok;
  h.dcid = payload.subspan(kLongHeaderDcidOffset, dcid_bytes);
  return h;
}

}  // namespace ferry::quic
