// IP addresses, endpoints (address + port) and prefixes: parsing, formatting, socket addresses.
#include "lib/common/net.hh"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace ferry::net {

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  char buf[INET6_ADDRSTRLEN];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  IpAddress a;
  if (inet_pton(AF_INET, buf, a.bytes.data()) == 1) {
    a.family = AF_INET;
    return a;
  }
  if (inet_pton(AF_INET6, buf, a.bytes.data()) == 1) {
    a.family = AF_INET6;
    return a;
  }
  return std::nullopt;
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(family, bytes.data(), buf, sizeof buf)) return "?";
  return buf;
}

std::optional<Endpoint> Endpoint::parse(std::string_view text) {
  std::string_view host, port_text;
  if (!text.empty() && text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // bare IPv6 needs brackets
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc{} || end != port_text.data() + port_text.size() || port_text.empty() ||
      port > 65535) {
    return std::nullopt;
  }
  auto address = IpAddress::parse(host);
  if (!address) return std::nullopt;
  if (text.front() == '[' && address->is_v4()) return std::nullopt;
  return Endpoint{*address, static_cast<std::uint16_t>(port)};
}

std::string Endpoint::to_string() const {
  if (address.is_v4()) return address.to_string() + ":" + std::to_string(port);
  return "[" + address.to_string() + "]:" + std::to_string(port);
}

socklen_t Endpoint::to_sockaddr(sockaddr_storage& storage) const {
  std::memset(&storage, 0, sizeof storage);
  if (address.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&storage);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    std::memcpy(&sin->sin_addr, address.bytes.data(), 4);
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&storage);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  std::memcpy(&sin6->sin6_addr, address.bytes.data(), 16);
  return sizeof(sockaddr_in6);
}

std::optional<Endpoint> Endpoint::from_sockaddr(const sockaddr* sa, socklen_t len) {
  Endpoint e;
  if (sa->sa_family == AF_INET && len >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(sa);
    e.address.family = AF_INET;
    std::memcpy(e.address.bytes.data(), &sin->sin_addr, 4);
    e.port = ntohs(sin->sin_port);
    return e;
  }
  if (sa->sa_family == AF_INET6 && len >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(sa);
    e.address.family = AF_INET6;
    std::memcpy(e.address.bytes.data(), &sin6->sin6_addr, 16);
    e.port = ntohs(sin6->sin6_port);
    return e;
  }
  return std::nullopt;
}

std::optional<Prefix> Prefix::parse(std::string_view text, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<Prefix> {
    if (why) *why = reason;
    return std::nullopt;
  };
  auto slash = text.find('/');
  if (slash == std::string_view::npos) return fail("expected ADDRESS/LENGTH");
  auto address = IpAddress::parse(text.substr(0, slash));
  if (!address) return fail("not an IPv4 or IPv6 address before '/'");
  auto len_text = text.substr(slash + 1);
  int length = -1;
  auto [end, ec] = std::from_chars(len_text.data(), len_text.data() + len_text.size(), length);
  if (ec != std::errc{} || end != len_text.data() + len_text.size() || len_text.empty() ||
      length < 0 || length > address->max_prefix_len()) {
    return fail(address->is_v4() ? "prefix length must be 0..32" : "prefix length must be 0..128");
  }
  Prefix p{*address, length};
  int bytes = address->is_v4() ? 4 : 16;
  for (int i = 0; i < bytes; ++i) {
    int keep = std::min(8, std::max(0, length - i * 8));
    std::uint8_t mask = keep == 0 ? 0 : static_cast<std::uint8_t>(0xff << (8 - keep));
    if (p.address.bytes[i] & ~mask) return fail("host bits are set (did you mean the network address?)");
  }
  return p;
}

std::string Prefix::to_string() const { return address.to_string() + "/" + std::to_string(length); }

bool Prefix::contains(const IpAddress& a) const {
  if (a.family != address.family) return false;
  for (int i = 0; i < length / 8; ++i) {
    if (a.bytes[i] != address.bytes[i]) return false;
  }
  int rest = length % 8;
  if (rest == 0) return true;
  std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a.bytes[length / 8] & mask) == (address.bytes[length / 8] & mask);
}

}  // namespace ferry::net
