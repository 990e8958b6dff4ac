// Building and parsing PROXY protocol v1 and v2 headers (see proxy_header.hh); section numbers
// refer to HAProxy's doc/proxy-protocol.txt.
#include "lib/proxy/proxy_header.hh"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace ferry::proxy::pp {
namespace {

constexpr std::string_view kV1Prefix = "PROXY ";
constexpr std::uint8_t kVersion2 = 0x20;
constexpr std::uint8_t kCommandLocal = 0x0;
constexpr std::uint8_t kCommandProxy = 0x1;
constexpr std::uint8_t kTcpOverIpv4 = 0x11;
constexpr std::uint8_t kTcpOverIpv6 = 0x21;
constexpr std::uint8_t kUnspec = 0x00;

class Writer {
 public:
  explicit Writer(Built& out) : out_(out) {}
  void bytes(const void* p, std::size_t n) {
    std::memcpy(out_.bytes.data() + out_.size, p, n);
    out_.size += n;
  }
  void text(std::string_view s) { bytes(s.data(), s.size()); }
  // The canonical text form the specification asks for (inet_ntop), without allocating.
  void address(const net::IpAddress& a) {
    char text_form[INET6_ADDRSTRLEN];
    if (inet_ntop(a.is_v4() ? AF_INET : AF_INET6, a.bytes.data(), text_form, sizeof text_form)) {
      text(text_form);
    }
  }
  void byte(std::uint8_t b) { out_.bytes[out_.size++] = b; }
  void be16(std::uint16_t v) {
    byte(static_cast<std::uint8_t>(v >> 8));
    byte(static_cast<std::uint8_t>(v & 0xFF));
  }
  void decimal(unsigned v) {
    char digits[8];
    std::size_t n = 0;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    while (n > 0) byte(static_cast<std::uint8_t>(digits[--n]));
  }

 private:
  Built& out_;
};

std::size_t address_bytes(const net::IpAddress& a) {
  return a.is_v4() ? 4 : 16;
}

ParseResult reject(Reject reason, const char* why) {
  ParseResult r;
  r.status = Status::rejected;
  r.reason = reason;
  r.why = why;
  return r;
}

ParseResult need_more() {
  return {};
}

// --- v1 fields (section 2.1): every number decimal without heading zeroes ---

// Parses [0, max] from `s` in full; false on anything else.
bool parse_decimal(std::string_view s, unsigned max, std::size_t max_digits, unsigned& out) {
  if (s.empty() || s.size() > max_digits || (s.size() > 1 && s[0] == '0')) return false;
  unsigned v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  if (v > max) return false;
  out = v;
  return true;
}

bool parse_v1_ipv4(std::string_view s, net::IpAddress& out) {
  out = net::IpAddress{};
  out.family = AF_INET;
  for (int i = 0; i < 4; ++i) {
    const std::size_t dot = i < 3 ? s.find('.') : s.size();
    if (dot == std::string_view::npos) return false;
    unsigned octet = 0;
    if (!parse_decimal(s.substr(0, dot), 255, 3, octet)) return false;
    out.bytes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(octet);
    s.remove_prefix(i < 3 ? dot + 1 : dot);
  }
  return s.empty();
}

bool parse_v1_ipv6(std::string_view s, net::IpAddress& out) {
  // Hex groups and colons (a mapped IPv4 tail as inet_ntop prints it, too), no zone.
  if (s.empty() || s.size() > 45) return false;
  for (char c : s) {
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!hex && c != ':' && c != '.') return false;
  }
  char text[46];
  std::memcpy(text, s.data(), s.size());
  text[s.size()] = '\0';
  out = net::IpAddress{};
  out.family = AF_INET6;
  return ::inet_pton(AF_INET6, text, out.bytes.data()) == 1;
}

// Splits off the field before the next single space; false when there is none.
bool next_field(std::string_view& rest, std::string_view& field) {
  const std::size_t space = rest.find(' ');
  if (space == std::string_view::npos) return false;
  field = rest.substr(0, space);
  rest.remove_prefix(space + 1);
  return true;
}

ParseResult parse_v1_line(std::string_view line, std::size_t consumed) {
  // `line` is everything between "PROXY " and the CRLF.
  ParseResult r;
  r.status = Status::done;
  r.version = Version::v1;
  r.consumed = consumed;
  if (line.starts_with("UNKNOWN") && (line.size() == 7 || line[7] == ' ')) {
    return r;  // the rest of the line is ignored (section 2.1)
  }
  std::string_view rest = line;
  std::string_view protocol, src, dst, sport;
  if (!next_field(rest, protocol)) return reject(Reject::malformed, "v1: no protocol field");
  const bool v4 = protocol == "TCP4";
  if (!v4 && protocol != "TCP6") {
    return reject(Reject::malformed, "v1: protocol is not TCP4, TCP6 or UNKNOWN");
  }
  if (!next_field(rest, src) || !next_field(rest, dst) || !next_field(rest, sport)) {
    return reject(Reject::malformed, "v1: fewer than four fields after the protocol");
  }
  const std::string_view dport = rest;  // a further space makes it invalid below
  net::IpAddress a, b;
  const bool addresses_ok = v4 ? parse_v1_ipv4(src, a) && parse_v1_ipv4(dst, b)
                               : parse_v1_ipv6(src, a) && parse_v1_ipv6(dst, b);
  if (!addresses_ok) return reject(Reject::malformed, "v1: invalid address");
  unsigned sp = 0, dp = 0;
  if (!parse_decimal(sport, 65535, 5, sp) || !parse_decimal(dport, 65535, 5, dp)) {
    return reject(Reject::malformed, "v1: invalid port");
  }
  r.has_addresses = true;
  r.source = net::Endpoint{a, static_cast<std::uint16_t>(sp)};
  r.destination = net::Endpoint{b, static_cast<std::uint16_t>(dp)};
  return r;
}

ParseResult parse_v1(std::span<const std::uint8_t> bytes) {
  const std::string_view in(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const std::size_t head = std::min(in.size(), kV1Prefix.size());
  if (in.substr(0, head) != kV1Prefix.substr(0, head)) {
    return head < 5 || in.substr(0, 5) != "PROXY"
               ? reject(Reject::absent, "not a PROXY protocol signature")
               : reject(Reject::malformed, "v1: no space after PROXY");
  }
  // The line ends at the first CR, which must be followed by LF; a lone LF ends nothing. The
  // CRLF must end within kV1MaxBytes, so a CR after index kV1MaxBytes - 2 is too late already.
  const std::size_t limit = std::min(in.size(), kV1MaxBytes);
  for (std::size_t i = kV1Prefix.size(); i < limit; ++i) {
    const char c = in[i];
    if (c == '\n') return reject(Reject::malformed, "v1: LF without CR");
    if (c != '\r') continue;
    if (i + 2 > kV1MaxBytes) break;
    if (i + 1 >= in.size()) return need_more();
    if (in[i + 1] != '\n') return reject(Reject::malformed, "v1: CR not followed by LF");
    return parse_v1_line(in.substr(kV1Prefix.size(), i - kV1Prefix.size()), i + 2);
  }
  if (in.size() >= kV1MaxBytes) return reject(Reject::too_long, "v1: no CRLF within 107 bytes");
  return need_more();
}

// --- v2 (section 2.2) ---

std::uint16_t be16_at(std::span<const std::uint8_t> b, std::size_t at) {
  return static_cast<std::uint16_t>((b[at] << 8) | b[at + 1]);
}

// The address block's size for a valid family/transport byte; -1 for an invalid one.
int v2_address_bytes(std::uint8_t fam) {
  switch (fam) {
    case 0x00:
      return 0;
    case 0x11:
    case 0x12:
      return 12;
    case 0x21:
    case 0x22:
      return 36;
    case 0x31:
    case 0x32:
      return 216;
    default:
      return -1;
  }
}

ParseResult parse_v2(std::span<const std::uint8_t> bytes) {
  const std::size_t head = std::min(bytes.size(), kV2Signature.size());
  if (std::memcmp(bytes.data(), kV2Signature.data(), head) != 0) {
    return reject(Reject::absent, "not a PROXY protocol signature");
  }
  if (bytes.size() > 12) {
    const std::uint8_t ver_cmd = bytes[12];
    if ((ver_cmd & 0xF0) != kVersion2) return reject(Reject::malformed, "v2: version is not 2");
    if ((ver_cmd & 0x0F) > kCommandProxy) {
      return reject(Reject::malformed, "v2: command is neither LOCAL nor PROXY");
    }
  }
  if (bytes.size() > 13 && v2_address_bytes(bytes[13]) < 0) {
    return reject(Reject::malformed, "v2: invalid address family or transport protocol");
  }
  if (bytes.size() < kV2FixedBytes) return need_more();
  const std::size_t length = be16_at(bytes, 14);
  if (length > kV2MaxLength) return reject(Reject::too_long, "v2: length above 520 bytes");
  const std::uint8_t command = bytes[12] & 0x0F;
  const std::uint8_t fam = bytes[13];
  const auto addresses = static_cast<std::size_t>(v2_address_bytes(fam));
  // LOCAL: the family and any addresses are ignored, but the length must still be skipped.
  if (command == kCommandProxy && length < addresses) {
    return reject(Reject::malformed, "v2: length shorter than the family's addresses");
  }
  if (bytes.size() < kV2FixedBytes + length) return need_more();
  const std::span<const std::uint8_t> block = bytes.subspan(kV2FixedBytes, length);
  if (command == kCommandProxy) {
    // TLVs (type, 16-bit length, value) fill the rest exactly; their contents are skipped.
    std::size_t at = addresses;
    while (at < block.size()) {
      if (block.size() - at < 3) return reject(Reject::malformed, "v2: truncated TLV");
      const std::size_t value = be16_at(block, at + 1);
      if (block.size() - at - 3 < value)
        return reject(Reject::malformed, "v2: TLV overruns the header");
      at += 3 + value;
    }
  }
  ParseResult r;
  r.status = Status::done;
  r.version = Version::v2;
  r.consumed = kV2FixedBytes + length;
  if (command == kCommandLocal) return r;
  const bool v4 = (fam >> 4) == 1;
  if ((fam >> 4) != 1 && (fam >> 4) != 2) return r;  // UNSPEC or UNIX: the connection's own
  const std::size_t n = v4 ? 4 : 16;
  r.source.address.family = r.destination.address.family = v4 ? AF_INET : AF_INET6;
  std::memcpy(r.source.address.bytes.data(), block.data(), n);
  std::memcpy(r.destination.address.bytes.data(), block.data() + n, n);
  r.source.port = be16_at(block, 2 * n);
  r.destination.port = be16_at(block, 2 * n + 2);
  r.has_addresses = true;
  return r;
}

}  // namespace

Built build_v1(const net::Endpoint& source, const net::Endpoint& destination) {
  Built out;
  Writer w(out);
  if (source.address.family != destination.address.family) return build_unknown(Version::v1);
  w.text(kV1Prefix);
  w.text(source.address.is_v4() ? "TCP4 " : "TCP6 ");
  w.address(source.address);
  w.byte(' ');
  w.address(destination.address);
  w.byte(' ');
  w.decimal(source.port);
  w.byte(' ');
  w.decimal(destination.port);
  w.text("\r\n");
  return out;
}

Built build_v2(const net::Endpoint& source, const net::Endpoint& destination) {
  if (source.address.family != destination.address.family) return build_unknown(Version::v2);
  Built out;
  Writer w(out);
  w.bytes(kV2Signature.data(), kV2Signature.size());
  w.byte(kVersion2 | kCommandProxy);
  const bool v4 = source.address.is_v4();
  const std::size_t n = address_bytes(source.address);
  w.byte(v4 ? kTcpOverIpv4 : kTcpOverIpv6);
  w.be16(static_cast<std::uint16_t>(2 * n + 4));
  w.bytes(source.address.bytes.data(), n);
  w.bytes(destination.address.bytes.data(), n);
  w.be16(source.port);
  w.be16(destination.port);
  return out;
}

Built build_v2_local() {
  Built out;
  Writer w(out);
  w.bytes(kV2Signature.data(), kV2Signature.size());
  w.byte(kVersion2 | kCommandLocal);
  w.byte(kUnspec);
  w.be16(0);
  return out;
}

Built build(Version version, const net::Endpoint& source, const net::Endpoint& destination) {
  return version == Version::v1 ? build_v1(source, destination) : build_v2(source, destination);
}

Built build_unknown(Version version) {
  Built out;
  Writer w(out);
  if (version == Version::v1) {
    w.text("PROXY UNKNOWN\r\n");
    return out;
  }
  w.bytes(kV2Signature.data(), kV2Signature.size());
  w.byte(kVersion2 | kCommandProxy);
  w.byte(kUnspec);
  w.be16(0);
  return out;
}

std::string_view to_string(Reject reason) {
  switch (reason) {
    case Reject::none:
      return "none";
    case Reject::absent:
      return "absent";
    case Reject::malformed:
      return "malformed";
    case Reject::too_long:
      return "too_long";
  }
  return "?";
}

ParseResult parse(std::span<const std::uint8_t> bytes) {
  if (bytes.empty()) return need_more();
  if (bytes[0] == 'P') return parse_v1(bytes);
  if (bytes[0] == kV2Signature[0]) return parse_v2(bytes);
  return reject(Reject::absent, "not a PROXY protocol signature");
}

}  // namespace ferry::proxy::pp
