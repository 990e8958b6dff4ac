// parse_request (lib/metrics/http_request.hh) on Beast 1.74's parser, ferry's limits around it:
// what moving the /metrics request head onto Beast would give. Not built by meson; see
// beast_parsers_ab.sh, which runs the unchanged unit tests against it.
#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/rfc7230.hpp>

#include "lib/metrics/http_request.hh"
#include "tests/bench/http/beast_head_parser.hh"

namespace ferry::metrics::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using beast::error_code;

std::string_view view(beast::string_view s) {
  return {s.data(), s.size()};
}

bool iequals(std::string_view a, std::string_view b) {
  return beast::iequals(beast::string_view(a.data(), a.size()),
                        beast::string_view(b.data(), b.size()));
}

// Beast parses; ferry counts the fields, the Host headers and the Connection options.
class HeadParser final : public bench::BeastHeadParser<true> {
 public:
  std::string method, target;
  int version = 11;
  std::size_t fields = 0;
  int hosts = 0;
  bool close = false;
  bool too_many = false;

 private:
  void on_request_impl(bhttp::verb, beast::string_view m, beast::string_view t, int v,
                       error_code&) override {
    method = view(m);
    target = view(t);
    version = v;
  }
  void on_field_impl(bhttp::field f, beast::string_view, beast::string_view value,
                     error_code& ec) override {
    if (++fields > kMaxHeaderCount) {
      too_many = true;
      ec = bhttp::error::header_limit;
      return;
    }
    if (f == bhttp::field::host) ++hosts;
    if (f == bhttp::field::connection) {
      for (auto option : bhttp::token_list{value}) close = close || iequals(view(option), "close");
    }
  }
};

// Reduces "http://host:port/path?q" to "/path?q", as lib/metrics/http_request.cc does.
bool origin_form(std::string_view target, std::string& out) {
  if (target.starts_with('/')) {
    out = target;
    return true;
  }
  for (std::string_view scheme : {"http://", "https://"}) {
    if (target.size() <= scheme.size() || !iequals(target.substr(0, scheme.size()), scheme)) {
      continue;
    }
    std::string_view rest = target.substr(scheme.size());
    std::size_t slash = rest.find_first_of("/?");
    if (slash == 0) return false;
    if (slash == std::string_view::npos) {
      out = "/";
    } else {
      out = (rest[slash] == '/' ? "" : "/") + std::string(rest.substr(slash));
    }
    return true;
  }
  return false;
}

ParseError error(int status, const char* reason) {
  return ParseError{status, reason};
}

}  // namespace

std::string_view Request::path() const {
  std::string_view t = target;
  return t.substr(0, t.find('?'));
}

ParseResult parse_request(std::string_view received) {
  HeadParser p;
  p.eager(false);
  p.header_limit(static_cast<std::uint32_t>(kMaxRequestLineBytes + 2 + kMaxHeaderBytes));
  error_code ec;
  const std::size_t used = p.put(boost::asio::buffer(received.data(), received.size()), ec);
  if (ec == bhttp::error::need_more) return NeedMore{};
  if (p.too_many) return error(431, "too many request headers");
  if (ec == bhttp::error::header_limit) return error(431, "request headers too large");
  if (ec) return error(400, "malformed request");
  if (p.method != "GET" && p.method != "HEAD") return error(405, "only GET and HEAD");
  Request r;
  r.method = p.method;
  r.version_minor = p.version == 10 ? 0 : 1;
  if (!origin_form(p.target, r.target)) return error(400, "malformed request target");
  if (p.chunked() || p.content_length().value_or(0) > 0) {
    return error(413, "a request body is not accepted");
  }
  if (r.version_minor == 1 && p.hosts != 1) return error(400, "exactly one Host header required");
  if (p.hosts > 1) return error(400, "more than one Host header");
  r.header_count = p.fields;
  r.keep_alive = r.version_minor == 1 && !p.close;
  r.request_bytes = used;
  return r;
}

}  // namespace ferry::metrics::http
