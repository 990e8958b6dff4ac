// The http check's status-line parser: final statuses, interim 1xx responses skipped, partial
// input asking for more, and non-HTTP answers refused at their first wrong byte.
#include "lib/health/http_status.hh"

#include <gtest/gtest.h>

namespace ferry::health {
namespace {

using State = HttpStatus::State;

int status_of(std::string_view text) {
  HttpStatus s = parse_http_status(text);
  EXPECT_EQ(s.state, State::complete) << text << ": " << s.why;
  return s.code;
}

std::string why_malformed(std::string_view text) {
  HttpStatus s = parse_http_status(text);
  EXPECT_EQ(s.state, State::malformed) << text;
  return s.why;
}

TEST(HttpStatus, ReadsTheCodeOfACompleteStatusLine) {
  EXPECT_EQ(status_of("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"), 200);
  EXPECT_EQ(status_of("HTTP/1.0 503 Service Unavailable\r\n"), 503);
  EXPECT_EQ(status_of("HTTP/1.1 404\r\n"), 404);      // the reason phrase may be missing
  EXPECT_EQ(status_of("HTTP/1.1 301 Moved\n"), 301);  // a bare LF ends the line too
  EXPECT_EQ(status_of("HTTP/1.1 200 \tok\r\n"), 200);
}

TEST(HttpStatus, SkipsInterimResponsesForTheFinalOne) {
  EXPECT_EQ(status_of("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n"), 204);
  EXPECT_EQ(status_of("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 500 x\r\n"), 500);
  EXPECT_EQ(parse_http_status("HTTP/1.1 100 Continue\r\n").state, State::need_more);
  EXPECT_EQ(parse_http_status("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.").state, State::need_more);
}

TEST(HttpStatus, AValidBeginningNeedsMore) {
  for (std::string_view prefix : {"", "H", "HTTP/", "HTTP/1.1", "HTTP/1.1 2", "HTTP/1.1 200",
                                  "HTTP/1.1 200 O", "HTTP/1.1 200 OK\r"}) {
    EXPECT_EQ(parse_http_status(prefix).state, State::need_more) << prefix;
  }
}

TEST(HttpStatus, RefusesNonHttpAnswersAtTheirFirstWrongByte) {
  EXPECT_EQ(why_malformed("SSH-2.0-OpenSSH_9.2\r\n"),
            "does not start with HTTP/: 'SSH-2.0-OpenSSH_...'");
  EXPECT_EQ(why_malformed("\x15\x03\x01"), "does not start with HTTP/: '\\x15\\x03\\x01'");
  EXPECT_EQ(why_malformed("http/1.1 200 OK\r\n"),
            "does not start with HTTP/: 'http/1.1 200 OK\\x0d...'");
  EXPECT_EQ(why_malformed("HTTP/1.1 20x OK\r\n"), "not a status line: 'HTTP/1.1 20x OK\\x0d...'");
  EXPECT_EQ(why_malformed("HTTP/11 200 OK\r\n"), "not a status line: 'HTTP/11 200 OK\\x0d\\x0a'");
  EXPECT_EQ(why_malformed("HTTP/1.1  200 OK\r\n").substr(0, 18), "not a status line:");
  EXPECT_EQ(why_malformed("HTTP/1.1 2000 OK\r\n").substr(0, 18), "not a status line:");
  EXPECT_EQ(why_malformed("HTTP/1.1 099 x\r\n"), "status 99 is not 1xx..5xx");
  EXPECT_EQ(why_malformed("HTTP/1.1 600 x\r\n"), "status 600 is not 1xx..5xx");
  EXPECT_EQ(why_malformed(std::string_view("HTTP/1.1 200 O\0K\r\n", 18)),
            "control character in the reason phrase");
  EXPECT_EQ(why_malformed("HTTP/1.1 200 O\rK"), "control character in the reason phrase");
}

}  // namespace
}  // namespace ferry::health
