// The proxy benchmark's one wire rule: every request starts with its own length and the length of
// the response it asks for, so one backend serves every load shape without being restarted.
#pragma once

#include <cstdint>
#include <cstring>

namespace ferry_bench {

// Little-endian on the wire (both ends run on this machine); the rest of a request is filler.
struct RequestHeader {
  std::uint32_t request_bytes;
  std::uint32_t response_bytes;
};
static_assert(sizeof(RequestHeader) == 8);

inline constexpr std::uint32_t kMinRequestBytes = sizeof(RequestHeader);

inline void write_request_header(char* out, RequestHeader h) {
  std::memcpy(out, &h, sizeof(h));
}

inline RequestHeader read_request_header(const char* in) {
  RequestHeader h;
  std::memcpy(&h, in, sizeof(h));
  return h;
}

}  // namespace ferry_bench
