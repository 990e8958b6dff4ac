// The host's own addresses, which the decap program strips tunnels to (its local_addrs map).
#pragma once

#include <vector>

#include "bpf/ferry_decap_shared.h"

namespace ferry::decap {

// Every IPv4 and IPv6 address of the calling thread's network namespace (getifaddrs), each once.
// Throws std::runtime_error.
std::vector<bpf::ferry_decap_addr_key> host_addresses();

// Makes the local_addrs map hold exactly `keys`: adds the new ones first, then deletes the ones no
// longer there, so an address kept is never missing in between. Throws std::runtime_error.
void write_local_addresses(int map_fd, const std::vector<bpf::ferry_decap_addr_key>& keys);

// The keys the map holds now.
std::vector<bpf::ferry_decap_addr_key> read_local_addresses(int map_fd);

}  // namespace ferry::decap
