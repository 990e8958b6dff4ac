// parse_http_status (lib/health/http_status.hh) on Beast 1.74's response parser: what moving the
// http check's status line onto Beast would give. Not built by meson; see beast_parsers_ab.sh.
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <string>

#include "lib/health/http_status.hh"
#include "tests/bench/http/beast_head_parser.hh"

namespace ferry::health {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using beast::error_code;

// Only the status matters; interim 1xx heads are parsed whole and skipped.
class StatusParser final : public bench::BeastHeadParser<false> {
 public:
  int status = 0;

 private:
  void on_response_impl(int code, beast::string_view, int, error_code&) override { status = code; }
};

}  // namespace

HttpStatus parse_http_status(std::string_view received) {
  for (;;) {
    StatusParser p;
    p.eager(false);
    error_code ec;
    const std::size_t used = p.put(boost::asio::buffer(received.data(), received.size()), ec);
    if (p.status >= 200 && p.status <= 599) {
      return {HttpStatus::State::complete, p.status, {}};
    }
    if (p.status != 0 && (p.status < 100 || p.status > 599)) {
      return {HttpStatus::State::malformed, 0,
              "status " + std::to_string(p.status) + " is not 1xx..5xx"};
    }
    if (ec == bhttp::error::need_more) return {};
    if (ec) return {HttpStatus::State::malformed, 0, ec.message()};
    received.remove_prefix(used);  // an interim 1xx head, parsed whole
  }
}

}  // namespace ferry::health
