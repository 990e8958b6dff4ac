// A strict, stateless parser of one HTTP/1.x request head (no body): small enough to fuzz.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

namespace ferry::metrics::http {

inline constexpr std::size_t kMaxRequestLineBytes = 8 * 1024;  // without the CRLF
inline constexpr std::size_t kMaxHeaderBytes = 16 * 1024;      // all header lines with CRLFs
inline constexpr std::size_t kMaxHeaderCount = 100;

// The bytes so far are a valid prefix of a request; read more.
struct NeedMore {};

// A complete GET or HEAD request head at the front of the input.
struct Request {
  std::string method;     // "GET" or "HEAD"
  std::string target;     // origin-form, e.g. "/metrics?x=1"; an absolute-form URI is reduced to it
  int version_minor = 1;  // HTTP/1.<version_minor>: 0 or 1
  std::size_t header_count = 0;
  bool keep_alive = true;         // HTTP/1.1 without "Connection: close"; HTTP/1.0 never
  std::size_t request_bytes = 0;  // consumed from the input, leading empty lines included

  // The target without its query string.
  std::string_view path() const;
};

// The request cannot be served; answer `status` and close the connection.
struct ParseError {
  int status = 400;  // 400, 405, 413, 414, 431 or 505
  std::string reason;
};

using ParseResult = std::variant<NeedMore, Request, ParseError>;

// Parses the request head at the front of `received` (everything read so far). Bytes after the
// head belong to the next, pipelined request. GET and HEAD only: any other method is 405, and a
// body (Content-Length > 0, Transfer-Encoding) is 413. Bare LF line ends are rejected.
ParseResult parse_request(std::string_view received);

}  // namespace ferry::metrics::http
