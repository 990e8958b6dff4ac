// The host's own addresses, which the decap program strips tunnels to (its local_addrs map).
#include "lib/decap/local_addresses.hh"

#include <bpf/bpf.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ferry::decap {
namespace {

bool same(const bpf::ferry_decap_addr_key& a, const bpf::ferry_decap_addr_key& b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool contains(const std::vector<bpf::ferry_decap_addr_key>& keys,
              const bpf::ferry_decap_addr_key& key) {
  return std::any_of(keys.begin(), keys.end(), [&](const auto& k) { return same(k, key); });
}

}  // namespace

std::vector<bpf::ferry_decap_addr_key> host_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    throw std::runtime_error(std::string("listing this host's addresses failed: ") +
                             std::strerror(errno));
  }
  std::vector<bpf::ferry_decap_addr_key> keys;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr) continue;
    bpf::ferry_decap_addr_key key{};
    if (i->ifa_addr->sa_family == AF_INET) {
      key.family = AF_INET;
      std::memcpy(key.addr, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, 4);
    } else if (i->ifa_addr->sa_family == AF_INET6) {
      key.family = AF_INET6;
      std::memcpy(key.addr, &reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr, 16);
    } else {
      continue;
    }
    if (!contains(keys, key)) keys.push_back(key);
  }
  freeifaddrs(list);
  return keys;
}

std::vector<bpf::ferry_decap_addr_key> read_local_addresses(int map_fd) {
  std::vector<bpf::ferry_decap_addr_key> keys;
  bpf::ferry_decap_addr_key key{};
  const void* previous = nullptr;
  while (bpf_map_get_next_key(map_fd, previous, &key) == 0) {
    keys.push_back(key);
    previous = &keys.back();
  }
  return keys;
}

void write_local_addresses(int map_fd, const std::vector<bpf::ferry_decap_addr_key>& keys) {
  if (keys.size() > FERRY_DECAP_MAX_LOCAL_ADDRS) {
    throw std::runtime_error("this host has " + std::to_string(keys.size()) +
                             " addresses, more than the decap program's " +
                             std::to_string(FERRY_DECAP_MAX_LOCAL_ADDRS));
  }
  std::uint32_t one = 1;
  for (const auto& key : keys) {
    if (bpf_map_update_elem(map_fd, &key, &one, BPF_ANY) != 0) {
      throw std::runtime_error(std::string("writing the local address map failed: ") +
                               std::strerror(errno));
    }
  }
  for (const auto& key : read_local_addresses(map_fd)) {
    if (!contains(keys, key)) bpf_map_delete_elem(map_fd, &key);
  }
}

}  // namespace ferry::decap
