// The two DNS messages a dns health check needs: the query it sends (built byte by byte, RFC 1035
// 4.1) and the verdict on a reply. Pure functions over bytes, so they are tested on their own.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::health {

// A standard query with recursion desired, one question of class IN for `name` ("." is the
// root; a trailing dot is optional). nullopt when `name` cannot be encoded (empty label, a label
// over 63 bytes, over 255 bytes in all).
std::optional<std::vector<std::uint8_t>> build_dns_query(std::uint16_t id, std::string_view name,
                                                         std::uint16_t qtype);

struct DnsReply {
  enum class Kind {
    answer,     // a response to `query`: rcode and truncated are set
    not_ours,   // another id or another question: not an answer to this query
    malformed,  // carries this query's id but is no valid response; `why` says how
  };
  Kind kind = Kind::malformed;
  std::uint8_t rcode = 0;
  bool truncated = false;  // TC: the server answered, over UDP in part
  std::string why;
};

// Judges `reply` against the `query` it should answer: same id, QR set, opcode QUERY, and (when
// the reply carries its question) the same question, names compared case-insensitively.
DnsReply parse_dns_reply(std::span<const std::uint8_t> reply, std::span<const std::uint8_t> query);

// "NOERROR" ... "REFUSED", else "RCODE n".
std::string dns_rcode_text(std::uint8_t rcode);

}  // namespace ferry::health
