// The PROXY protocol header (HAProxy's proxy-protocol.txt, versions 1 and 2): building the header
// ferry sends to backends, and a strict, bounded parser of the header a trusted proxy in front of
// ferry sends. Neither allocates; the parser reads only the bytes it is given.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "lib/common/net.hh"

namespace ferry::proxy::pp {

enum class Version : std::uint8_t { v1, v2 };

// The v2 signature: \r\n\r\n\0\r\nQUIT\n (section 2.2).
inline constexpr std::array<std::uint8_t, 12> kV2Signature = {0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D,
                                                              0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A};
inline constexpr std::size_t kV1MaxBytes = 107;   // "PROXY UNKNOWN <39> <39> 65535 65535\r\n"
inline constexpr std::size_t kV2FixedBytes = 16;  // signature, ver_cmd, fam, len
// What ferry accepts of the v2 length field: the whole header then fits the 536-byte segment
// every TCP host must take (section 2), which bounds the receive buffer too.
inline constexpr std::size_t kMaxHeaderBytes = 536;
inline constexpr std::size_t kV2MaxLength = kMaxHeaderBytes - kV2FixedBytes;  // 520

// The largest header ferry builds: v1 TCP6 is 104 bytes, v2 TCP over IPv6 16 + 36 = 52.
struct Built {
  std::array<std::uint8_t, 108> bytes{};
  std::size_t size = 0;
  std::span<const std::uint8_t> view() const { return {bytes.data(), size}; }
  std::string_view text() const { return {reinterpret_cast<const char*>(bytes.data()), size}; }
};

// "PROXY TCP4|TCP6 SRC DST SPORT DPORT\r\n"; "PROXY UNKNOWN\r\n" when the two families differ.
Built build_v1(const net::Endpoint& source, const net::Endpoint& destination);
// PROXY command with TCP over IPv4 (0x11) or IPv6 (0x21); AF_UNSPEC (0x00, no addresses) when
// the two families differ.
Built build_v2(const net::Endpoint& source, const net::Endpoint& destination);
// LOCAL command, AF_UNSPEC, no addresses: a connection of ferry's own (a health check).
Built build_v2_local();
Built build(Version version, const net::Endpoint& source, const net::Endpoint& destination);
// When the connection's addresses are unknown: "PROXY UNKNOWN\r\n", or v2 PROXY with AF_UNSPEC.
Built build_unknown(Version version);

enum class Status : std::uint8_t { need_more, done, rejected };

// Why a header was rejected; the label of ferry_proxy_header_rejected_total{reason}.
enum class Reject : std::uint8_t {
  none,
  absent,     // the first bytes are neither "PROXY" nor the v2 signature
  malformed,  // a PROXY header that breaks the specification
  too_long,   // no CRLF within 107 bytes (v1), or a v2 length above kV2MaxLength
};
std::string_view to_string(Reject reason);

struct ParseResult {
  Status status = Status::need_more;
  Reject reason = Reject::none;
  const char* why = "";      // with rejected: what was wrong, for the log
  std::size_t consumed = 0;  // with done: the header's bytes; what follows is client data
  Version version = Version::v1;
  // With done: false for v1 UNKNOWN, v2 LOCAL, and v2 PROXY with a family other than TCP/UDP
  // over IPv4/IPv6; the connection's own endpoints stand then (the specification's fallback).
  bool has_addresses = false;
  net::Endpoint source;
  net::Endpoint destination;
};

// Parses the bytes received so far from the start of a connection (call again with more bytes
// after need_more; the verdict on a prefix never contradicts the verdict on the whole). Rejects
// as soon as the bytes cannot start a valid header; needs at most kMaxHeaderBytes.
ParseResult parse(std::span<const std::uint8_t> bytes);

}  // namespace ferry::proxy::pp
