// IP addresses, endpoints (address + port) and prefixes: parsing, formatting, socket addresses.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::net {

// An IPv4 or IPv6 address. IPv4 is kept in the first 4 bytes, network byte order.
struct IpAddress {
  int family = AF_INET;  // AF_INET or AF_INET6
  std::array<std::uint8_t, 16> bytes{};

  static std::optional<IpAddress> parse(std::string_view text);
  std::string to_string() const;
  bool is_v4() const { return family == AF_INET; }
  int max_prefix_len() const { return is_v4() ? 32 : 128; }
  bool operator==(const IpAddress&) const = default;
  // Family, then bytes: an order for maps keyed by addresses (not the text's order).
  auto operator<=>(const IpAddress&) const = default;
};

// An address and a port. Text form: "10.0.0.1:53", "[2001:db8::1]:53".
struct Endpoint {
  IpAddress address;
  std::uint16_t port = 0;

  static std::optional<Endpoint> parse(std::string_view text);
  std::string to_string() const;
  // Fills `storage` and returns the length to pass to bind/connect.
  socklen_t to_sockaddr(sockaddr_storage& storage) const;
  static std::optional<Endpoint> from_sockaddr(const sockaddr* sa, socklen_t len);
  bool operator==(const Endpoint&) const = default;
  auto operator<=>(const Endpoint&) const = default;
};

// A CIDR prefix, "192.0.2.0/24". Host bits must be zero, so a typo is not silently widened.
struct Prefix {
  IpAddress address;
  int length = 0;

  static std::optional<Prefix> parse(std::string_view text, std::string* why = nullptr);
  std::string to_string() const;
  bool contains(const IpAddress& a) const;
  bool operator==(const Prefix&) const = default;
};

}  // namespace ferry::net
