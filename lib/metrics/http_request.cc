// A strict, stateless parser of one HTTP/1.x request head (no body): small enough to fuzz.
#include "lib/metrics/http_request.hh"

#include <algorithm>
#include <cstring>

namespace ferry::metrics::http {
namespace {

// RFC 9110 token characters (methods, header names).
bool is_tchar(unsigned char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}
bool is_vchar(unsigned char c) {
  return c >= 0x21 && c <= 0x7e;
}
// Header field values: visible ASCII, obs-text, space and tab.
bool is_field_char(unsigned char c) {
  return is_vchar(c) || c >= 0x80 || c == ' ' || c == '\t';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ParseError error(int status, const char* reason) {
  return ParseError{status, reason};
}

// Where a scanned line stands: complete (end = index of its CR), still arriving, or invalid.
enum class LineState { complete, partial, invalid };

// The request line "METHOD SP target SP HTTP/x.y CRLF", checked byte by byte so that garbage
// is rejected as soon as it arrives rather than when a line end finally shows up.
struct RequestLine {
  std::string_view method, target, version;
};

LineState scan_request_line(std::string_view in, RequestLine& line, std::size_t& end) {
  enum { method, target, version } part = method;
  std::size_t part_start = 0;
  for (std::size_t i = 0; i < in.size(); ++i) {
    auto c = static_cast<unsigned char>(in[i]);
    if (c == '\r') {
      if (part != version || i == part_start) return LineState::invalid;
      if (i + 1 == in.size()) return LineState::partial;
      if (in[i + 1] != '\n') return LineState::invalid;
      line.version = in.substr(part_start, i - part_start);
      end = i;
      return LineState::complete;
    }
    if (c == ' ' && part != version) {
      if (i == part_start) return LineState::invalid;  // empty part or doubled space
      (part == method ? line.method : line.target) = in.substr(part_start, i - part_start);
      part = part == method ? target : version;
      part_start = i + 1;
      continue;
    }
    bool ok = part == method ? is_tchar(c) : is_vchar(c);
    if (part == version) {
      // Only "HTTP/d.d" can follow the target: no need to wait for the line end to say no.
      std::size_t at = i - part_start;
      ok = ok && at < 8 && (at >= 5 || c == static_cast<unsigned char>("HTTP/"[at]));
    }
    if (!ok) return LineState::invalid;
  }
  return LineState::partial;
}

// "HTTP/1.1" -> major 1, minor 1.
bool parse_version(std::string_view v, int& major, int& minor) {
  if (v.size() != 8 || !v.starts_with("HTTP/") || v[6] != '.') return false;
  if (v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9') return false;
  major = v[5] - '0';
  minor = v[7] - '0';
  return true;
}

// Reduces "http://host:port/path?q" to "/path?q"; origin-form passes unchanged.
bool origin_form(std::string_view target, std::string& out) {
  if (target.starts_with('/')) {
    out = target;
    return true;
  }
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() > scheme.size() && iequals(target.substr(0, scheme.size()), scheme)) {
      std::string_view rest = target.substr(scheme.size());
      std::size_t slash = rest.find_first_of("/?");
      if (slash == 0) return false;  // no authority
      if (slash == std::string_view::npos) {
        out = "/";
      } else {
        out = rest[slash] == '/' ? std::string(rest.substr(slash))
                                 : "/" + std::string(rest.substr(slash));
      }
      return true;
    }
  }
  return false;
}

// Whether the comma-separated options of a Connection header include "close".
bool has_close_option(std::string_view value) {
  for (;;) {
    std::size_t comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), "close")) return true;
    if (comma == std::string_view::npos) return false;
    value.remove_prefix(comma + 1);
  }
}

}  // namespace

std::string_view Request::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

ParseResult parse_request(std::string_view received) {
  // RFC 9112 2.2: ignore empty lines before the request line (some clients pipeline a CRLF).
  std::size_t pos = 0;
  while (received.size() - pos >= 2 && received[pos] == '\r' && received[pos + 1] == '\n') {
    pos += 2;
    if (pos > kMaxRequestLineBytes) return error(400, "too many empty lines before the request");
  }
  if (received.size() - pos == 1 && received[pos] == '\r') return NeedMore{};

  RequestLine line;
  std::size_t line_end = 0;
  std::string_view rest = received.substr(pos);
  LineState state = scan_request_line(rest.substr(0, kMaxRequestLineBytes + 2), line, line_end);
  if (state == LineState::invalid) return error(400, "malformed request line");
  if (state == LineState::partial) {
    if (rest.size() > kMaxRequestLineBytes + 1) return error(414, "request line too long");
    return NeedMore{};
  }

  int major = 0, minor = 0;
  if (!parse_version(line.version, major, minor)) return error(400, "malformed HTTP version");
  if (major != 1) return error(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  Request request;
  request.version_minor = minor == 0 ? 0 : 1;  // a later 1.x is answered as 1.1 (RFC 9110 6.2)
  if (line.method != "GET" && line.method != "HEAD") return error(405, "only GET and HEAD");
  request.method = line.method;
  if (!origin_form(line.target, request.target)) return error(400, "malformed request target");

  // Header lines "name: value CRLF" up to an empty line.
  pos += line_end + 2;
  const std::size_t headers_start = pos;
  bool close = false;
  int hosts = 0;
  std::string_view content_length;
  for (;;) {
    std::string_view in = received.substr(pos);
    if (in.starts_with("\r\n")) {
      pos += 2;
      break;
    }
    if (in.empty() || in == "\r") return NeedMore{};
    if (in[0] == ' ' || in[0] == '\t') return error(400, "obsolete header line folding");
    if (request.header_count == kMaxHeaderCount) return error(431, "too many request headers");

    // This line and its CRLF must leave room for the final empty line within the budget.
    std::size_t budget = kMaxHeaderBytes - (pos - headers_start);
    std::size_t max_cr = budget >= 4 ? budget - 4 : 0;
    std::size_t colon = 0;
    while (colon < in.size() && colon <= max_cr &&
           is_tchar(static_cast<unsigned char>(in[colon]))) {
      ++colon;
    }
    if (colon > max_cr) return error(431, "request headers too large");
    if (colon == in.size()) return NeedMore{};
    if (in[colon] != ':' || colon == 0) return error(400, "malformed header name");
    std::size_t cr = colon + 1;
    while (cr < in.size() && cr <= max_cr && is_field_char(static_cast<unsigned char>(in[cr]))) {
      ++cr;
    }
    if (cr > max_cr) return error(431, "request headers too large");
    if (cr == in.size()) return NeedMore{};
    if (in[cr] != '\r') return error(400, "malformed header value");
    if (cr + 1 == in.size()) return NeedMore{};
    if (in[cr + 1] != '\n') return error(400, "malformed header line end");

    std::string_view name = in.substr(0, colon);
    std::string_view value = trim(in.substr(colon + 1, cr - colon - 1));
    ++request.header_count;
    pos += cr + 2;
    if (iequals(name, "host")) {
      ++hosts;
    } else if (iequals(name, "connection")) {
      close = close || has_close_option(value);
    } else if (iequals(name, "content-length")) {
      bool digits = !value.empty() && std::all_of(value.begin(), value.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
      if (!digits) return error(400, "malformed Content-Length");
      if (!content_length.empty() && content_length != value) {
        return error(400, "conflicting Content-Length headers");
      }
      content_length = value;
      if (value.find_first_not_of('0') != std::string_view::npos) {
        return error(413, "a request body is not accepted");
      }
    } else if (iequals(name, "transfer-encoding")) {
      return error(413, "a request body is not accepted");
    }
  }

  // RFC 9112 3.2: an HTTP/1.1 request has exactly one Host header.
  if (request.version_minor == 1 && hosts != 1)
    return error(400, "exactly one Host header required");
  if (hosts > 1) return error(400, "more than one Host header");
  // HTTP/1.0 keep-alive is not offered: a scraper speaking 1.0 gets one answer per connection.
  request.keep_alive = request.version_minor == 1 && !close;
  request.request_bytes = pos;
  return request;
}

}  // namespace ferry::metrics::http
