// DNS wire format for the dns check: header (12 bytes), then the question as length-prefixed
// labels, QTYPE and QCLASS, all big-endian.
#include "lib/health/dns_message.hh"

#include "lib/config/config.hh"

namespace ferry::health {
namespace {

constexpr std::size_t kHeaderBytes = 12;
constexpr std::size_t kMaxNameBytes = 255;  // on the wire, with the length bytes and the root
constexpr std::uint16_t kClassIn = 1;

std::uint16_t read16(std::span<const std::uint8_t> b, std::size_t at) {
  return static_cast<std::uint16_t>(b[at] << 8 | b[at + 1]);
}

void put16(std::vector<std::uint8_t>& out, std::uint16_t v) {
  out.push_back(static_cast<std::uint8_t>(v >> 8));
  out.push_back(static_cast<std::uint8_t>(v & 0xff));
}

std::uint8_t fold(std::uint8_t c) {
  return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

}  // namespace

std::optional<std::vector<std::uint8_t>> build_dns_query(std::uint16_t id, std::string_view name,
                                                         std::uint16_t qtype) {
  std::vector<std::uint8_t> out;
  put16(out, id);
  put16(out, 0x0100);  // QR=0, opcode QUERY, RD=1
  put16(out, 1);       // QDCOUNT
  put16(out, 0);       // ANCOUNT
  put16(out, 0);       // NSCOUNT
  put16(out, 0);       // ARCOUNT
  if (name.empty()) return std::nullopt;
  if (name.back() == '.') name.remove_suffix(1);
  std::size_t name_bytes = 1;  // the root's zero length
  while (!name.empty()) {
    auto dot = name.find('.');
    std::string_view label = name.substr(0, dot);
    if (label.empty() || label.size() > 63) return std::nullopt;
    name_bytes += 1 + label.size();
    if (name_bytes > kMaxNameBytes) return std::nullopt;
    out.push_back(static_cast<std::uint8_t>(label.size()));
    out.insert(out.end(), label.begin(), label.end());
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
    if (name.empty()) return std::nullopt;  // "a..": an empty label before the end
  }
  out.push_back(0);
  put16(out, qtype);
  put16(out, kClassIn);
  return out;
}

DnsReply parse_dns_reply(std::span<const std::uint8_t> reply, std::span<const std::uint8_t> query) {
  DnsReply out;
  if (reply.size() >= 2 && query.size() >= 2 && read16(reply, 0) != read16(query, 0)) {
    out.kind = DnsReply::Kind::not_ours;
    out.why = "a reply with another id";
    return out;
  }
  if (reply.size() < kHeaderBytes) {
    out.why = "reply of " + std::to_string(reply.size()) + " bytes is shorter than a DNS header";
    return out;
  }
  std::uint16_t flags = read16(reply, 2);
  if (!(flags & 0x8000)) {
    out.why = "not a response (QR is 0)";
    return out;
  }
  if (((flags >> 11) & 0xf) != 0) {
    out.why = "opcode " + std::to_string((flags >> 11) & 0xf) + " is not QUERY";
    return out;
  }
  out.truncated = flags & 0x0200;
  out.rcode = static_cast<std::uint8_t>(flags & 0xf);
  std::uint16_t qdcount = read16(reply, 4);
  if (qdcount > 1) {
    out.why = std::to_string(qdcount) + " questions in the reply";
    return out;
  }
  if (qdcount == 1 && query.size() > kHeaderBytes) {
    // The reply repeats the question first; servers copy it as sent (no compression).
    std::size_t question_bytes = query.size() - kHeaderBytes;
    if (reply.size() < kHeaderBytes + question_bytes) {
      if (!out.truncated) {
        out.why = "reply ends inside its question";
        return out;
      }
    } else {
      for (std::size_t i = 0; i < question_bytes; ++i) {
        if (fold(reply[kHeaderBytes + i]) != fold(query[kHeaderBytes + i])) {
          out.kind = DnsReply::Kind::not_ours;
          out.why = "a reply to another question";
          return out;
        }
      }
    }
  }
  out.kind = DnsReply::Kind::answer;
  return out;
}

std::string dns_rcode_text(std::uint8_t rcode) {
  if (rcode < config::kDnsRcodeNames.size()) return std::string(config::kDnsRcodeNames[rcode]);
  return "RCODE " + std::to_string(rcode);
}

}  // namespace ferry::health
