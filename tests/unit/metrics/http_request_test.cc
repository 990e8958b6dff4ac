// The HTTP/1.x request head parser behind the metrics endpoint (also a fuzz target).
#include "lib/metrics/http_request.hh"

#include <gtest/gtest.h>

#include <string>

namespace ferry::metrics::http {
namespace {

Request complete(const ParseResult& r) {
  if (auto* e = std::get_if<ParseError>(&r)) {
    ADD_FAILURE() << "error " << e->status << ": " << e->reason;
  } else if (std::holds_alternative<NeedMore>(r)) {
    ADD_FAILURE() << "need more";
  }
  return std::holds_alternative<Request>(r) ? std::get<Request>(r) : Request{};
}

int status_of(const ParseResult& r) {
  if (auto* e = std::get_if<ParseError>(&r)) return e->status;
  return std::holds_alternative<NeedMore>(r) ? -1 : 0;  // -1: need more, 0: complete
}

TEST(ParseRequest, ParsesCompleteGetWithHeaders) {
  std::string text =
      "GET /metrics?x=1 HTTP/1.1\r\nHost: localhost:9469\r\nUser-Agent: Prometheus/2.42\r\n"
      "Accept: text/plain\r\n\r\n";
  Request r = complete(parse_request(text));
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/metrics?x=1");
  EXPECT_EQ(r.path(), "/metrics");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_EQ(r.header_count, 3u);
  EXPECT_TRUE(r.keep_alive);
  EXPECT_EQ(r.request_bytes, text.size());
}

TEST(ParseRequest, StopsAtTheEndOfTheFirstPipelinedRequest) {
  std::string first = "HEAD / HTTP/1.1\r\nHost: a\r\n\r\n";
  Request r = complete(parse_request(first + "GET /metrics HTTP/1.1\r\n"));
  EXPECT_EQ(r.method, "HEAD");
  EXPECT_EQ(r.request_bytes, first.size());
}

TEST(ParseRequest, NeedsMoreAtEverySplitPointThenCompletes) {
  std::string text = "GET /metrics HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n";
  for (std::size_t cut = 0; cut < text.size(); ++cut) {
    EXPECT_EQ(status_of(parse_request(text.substr(0, cut))), -1) << "cut at " << cut;
  }
  EXPECT_EQ(complete(parse_request(text)).request_bytes, text.size());
}

TEST(ParseRequest, SkipsLeadingEmptyLines) {
  std::string text = "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n";
  EXPECT_EQ(complete(parse_request(text)).request_bytes, text.size());
}

TEST(ParseRequest, KeepAliveFollowsVersionAndConnectionHeader) {
  EXPECT_FALSE(
      complete(parse_request("GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, CLOSE\r\n\r\n"))
          .keep_alive);
  Request old = complete(parse_request("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  EXPECT_EQ(old.version_minor, 0);
  EXPECT_FALSE(old.keep_alive);
  EXPECT_EQ(complete(parse_request("GET / HTTP/1.9\r\nHost: h\r\n\r\n")).version_minor, 1);
}

TEST(ParseRequest, ReducesAbsoluteFormToOriginForm) {
  EXPECT_EQ(complete(parse_request("GET http://h:9469/metrics HTTP/1.1\r\nHost: h\r\n\r\n")).target,
            "/metrics");
  EXPECT_EQ(complete(parse_request("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n")).target, "/");
  EXPECT_EQ(complete(parse_request("GET HTTP://h?q HTTP/1.1\r\nHost: h\r\n\r\n")).target, "/?q");
  EXPECT_EQ(status_of(parse_request("GET http:///x HTTP/1.1\r\nHost: h\r\n\r\n")), 400);
  EXPECT_EQ(status_of(parse_request("GET metrics HTTP/1.1\r\nHost: h\r\n\r\n")), 400);
}

TEST(ParseRequest, RejectsOtherMethodsWith405AndBadTokensWith400) {
  EXPECT_EQ(status_of(parse_request("POST /metrics HTTP/1.1\r\nHost: h\r\n\r\n")), 405);
  EXPECT_EQ(status_of(parse_request("get /metrics HTTP/1.1\r\n")), 405);
  EXPECT_EQ(status_of(parse_request("DELETE / HTTP/1.1\r\n")), 405);
  EXPECT_EQ(status_of(parse_request("G(T / HTTP/1.1\r\n")), 400);
  EXPECT_EQ(status_of(parse_request("GET  / HTTP/1.1\r\n")), 400);
  EXPECT_EQ(status_of(parse_request(" GET / HTTP/1.1\r\n")), 400);
}

TEST(ParseRequest, RejectsTooLongRequestLineWith414) {
  std::string target(kMaxRequestLineBytes, 'a');
  std::string text = "GET /" + target + " HTTP/1.1\r\nHost: h\r\n\r\n";
  EXPECT_EQ(status_of(parse_request(text)), 414);
  // Also before the line end arrives.
  EXPECT_EQ(status_of(parse_request(text.substr(0, kMaxRequestLineBytes + 2))), 414);
  // The longest allowed line is fine.
  std::string longest = "GET /" + std::string(kMaxRequestLineBytes - 14, 'a') + " HTTP/1.1";
  ASSERT_EQ(longest.size(), kMaxRequestLineBytes);
  EXPECT_EQ(status_of(parse_request(longest + "\r\nHost: h\r\n\r\n")), 0);
}

TEST(ParseRequest, RejectsTooManyHeadersWith431) {
  std::string text = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (std::size_t i = 1; i < kMaxHeaderCount; ++i) text += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(complete(parse_request(text + "\r\n")).header_count, kMaxHeaderCount);
  text += "X-Straw: v\r\n";
  EXPECT_EQ(status_of(parse_request(text)), 431);
}

TEST(ParseRequest, RejectsTooLargeHeadersWith431EvenBeforeTheyEnd) {
  std::string head = "GET / HTTP/1.1\r\nHost: h\r\n";
  std::string big = "X-Big: " + std::string(kMaxHeaderBytes, 'v');
  EXPECT_EQ(status_of(parse_request(head + big.substr(0, kMaxHeaderBytes))), 431);
  // Exactly at the budget: header lines plus the final CRLF make kMaxHeaderBytes.
  std::string exact = "X-Fill: " + std::string(kMaxHeaderBytes - 8 - 2 - 9 - 2, 'v') + "\r\n";
  std::string text = head + exact + "\r\n";
  ASSERT_EQ(text.size() - std::string("GET / HTTP/1.1\r\n").size(), kMaxHeaderBytes);
  EXPECT_EQ(status_of(parse_request(text)), 0);
  std::string over = head + "X-Fill: v" + exact.substr(8) + "\r\n";
  EXPECT_EQ(status_of(parse_request(over)), 431);
}

TEST(ParseRequest, AnswersHttp2PrefaceWith505) {
  EXPECT_EQ(status_of(parse_request("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")), 505);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/3.0\r\n\r\n")), 505);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1x\r\n\r\n")), 400);
  EXPECT_EQ(status_of(parse_request("GET / HTTQ/1.1\r\n\r\n")), 400);
}

TEST(ParseRequest, RejectsBinaryGarbageAtOnce) {
  EXPECT_EQ(status_of(parse_request(std::string("\x16\x03\x01\x02\x00", 5))), 400);  // TLS hello
  EXPECT_EQ(status_of(parse_request(std::string("GET /\0 HTTP/1.1", 15))), 400);
  EXPECT_EQ(status_of(parse_request("\xff\xfe")), 400);
  EXPECT_EQ(status_of(parse_request("GET / FTP/1")), 400);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.10")), 400);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1\r\nHost: h\r\nX: a\x01z\r\n\r\n")), 400);
}

TEST(ParseRequest, RejectsMissingCrlf) {
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1\nHost: h\n\n")), 400);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1\r\nHost: h\n\r\n")), 400);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1\rX")), 400);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1\r\nHost: h\r\n\rX")), 400);
  // Without any line end the request is merely incomplete.
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1")), -1);
}

TEST(ParseRequest, RejectsMalformedHeaders) {
  auto with = [](std::string header) {
    return status_of(parse_request("GET / HTTP/1.1\r\nHost: h\r\n" + header + "\r\n\r\n"));
  };
  EXPECT_EQ(with("X-A : v"), 400);  // space before the colon
  EXPECT_EQ(with(": v"), 400);      // empty name
  EXPECT_EQ(with("No colon"), 400);
  EXPECT_EQ(with(" folded"), 400);      // obs-fold
  EXPECT_EQ(with("Host: again"), 400);  // a second Host
  EXPECT_EQ(with("X-Utf8: caf\xc3\xa9"), 0);
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.1\r\n\r\n")), 400);  // HTTP/1.1 needs Host
  EXPECT_EQ(status_of(parse_request("GET / HTTP/1.0\r\n\r\n")), 0);
}

TEST(ParseRequest, RejectsRequestBodiesWith413) {
  auto with = [](std::string header) {
    return status_of(parse_request("GET / HTTP/1.1\r\nHost: h\r\n" + header + "\r\n\r\n"));
  };
  EXPECT_EQ(with("Content-Length: 0"), 0);
  EXPECT_EQ(with("Content-Length: 00"), 0);
  EXPECT_EQ(with("Content-Length: 5"), 413);
  EXPECT_EQ(with("Transfer-Encoding: chunked"), 413);
  EXPECT_EQ(with("Content-Length: -1"), 400);
  EXPECT_EQ(with("Content-Length: 0\r\nContent-Length: 1"), 400);
}

}  // namespace
}  // namespace ferry::metrics::http
