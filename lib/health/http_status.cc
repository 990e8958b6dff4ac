// Status lines byte by byte (RFC 9112 4): every prefix is judged, so a non-HTTP answer (an SSH
// banner, a TLS alert) is refused at its first byte rather than after a timeout.
#include "lib/health/http_status.hh"

#include <fmt/format.h>

namespace ferry::health {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// The first bytes of what the server sent, quoted, control and non-ASCII bytes as \xNN.
std::string shown(std::string_view s) {
  std::string out = "'";
  for (char c : s.substr(0, 16)) {
    auto u = static_cast<unsigned char>(c);
    out += u < 0x20 || u >= 0x7f ? fmt::format("\\x{:02x}", u) : std::string(1, c);
  }
  return out + (s.size() > 16 ? "...'" : "'");
}

HttpStatus malformed(std::string why) {
  return {HttpStatus::State::malformed, 0, std::move(why)};
}

// One status line at the start of `line` (which may be cut short); `consumed` is its length
// with the line end when complete.
// Whether line[from, stop) is a reason phrase so far: text, no control characters but tab, and a
// CR only as its last byte (before the LF).
bool reason_ok(std::string_view line, std::size_t from, std::size_t stop) {
  for (std::size_t i = from; i < stop; ++i) {
    char c = line[i];
    bool last = i + 1 == stop;
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t' && !(c == '\r' && last)) || c == 0x7f) {
      return false;
    }
  }
  return true;
}

HttpStatus status_line(std::string_view line, std::size_t& consumed) {
  constexpr std::string_view kPrefix = "HTTP/";
  // Positions: 0..4 "HTTP/", 5 digit, 6 '.', 7 digit, 8 ' ', 9..11 digits, 12 ' ' or line end.
  for (std::size_t i = 0; i < 13; ++i) {
    if (i >= line.size()) return {};
    char c = line[i];
    bool ok = i < 5               ? c == kPrefix[i]
              : i == 5 || i == 7  ? is_digit(c)
              : i == 6            ? c == '.'
              : i == 8            ? c == ' '
              : i >= 9 && i <= 11 ? is_digit(c)
                                  : c == ' ' || c == '\r' || c == '\n';
    if (!ok) {
      return malformed(i < 5 ? "does not start with HTTP/: " + shown(line)
                             : "not a status line: " + shown(line));
    }
  }
  int code = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
  if (code < 100 || code > 599)
    return malformed("status " + std::to_string(code) + " is not 1xx..5xx");
  auto end = line.find('\n', 12);
  if (end == std::string_view::npos) {
    // The reason phrase so far (no LF yet).
    if (!reason_ok(line, 13, line.size())) {
      return malformed("control character in the reason phrase");
    }
    return {};
  }
  if (!reason_ok(line, 12, end)) return malformed("control character in the reason phrase");
  consumed = end + 1;
  return {HttpStatus::State::complete, code, {}};
}

}  // namespace

HttpStatus parse_http_status(std::string_view received) {
  std::size_t at = 0;
  for (;;) {
    std::size_t consumed = 0;
    HttpStatus s = status_line(received.substr(at), consumed);
    if (s.state != HttpStatus::State::complete || s.code >= 200) return s;
    // An interim response: skip its head, up to and with the empty line.
    std::size_t head_end = received.find("\r\n\r\n", at);
    std::size_t lf_end = received.find("\n\n", at);
    if (head_end != std::string_view::npos) head_end += 4;
    if (lf_end != std::string_view::npos &&
        (head_end == std::string_view::npos || lf_end + 2 < head_end)) {
      head_end = lf_end + 2;
    }
    if (head_end == std::string_view::npos) return {};
    at = head_end;
  }
}

}  // namespace ferry::health
