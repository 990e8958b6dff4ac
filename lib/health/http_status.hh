// The status of an HTTP/1.x response, read from the first bytes a server sent: what an http
// health check judges. A pure function over text, so it is tested on its own.
#pragma once

#include <string>
#include <string_view>

namespace ferry::health {

struct HttpStatus {
  enum class State {
    complete,   // `code` is the final response's status
    need_more,  // a valid beginning; read more
    malformed,  // not an HTTP/1.x response; `why` says where
  };
  State state = State::need_more;
  int code = 0;
  std::string why;
};

// The status line "HTTP/d.d SSS[ reason]" ending in CRLF (or LF) at the start of `received`.
// Interim 1xx responses (their head up to the empty line) are skipped for the final one.
HttpStatus parse_http_status(std::string_view received);

}  // namespace ferry::health
