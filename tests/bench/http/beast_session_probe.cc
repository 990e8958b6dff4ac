// lib/metrics/http_server.cc plus what a Beast-driven session would instantiate (a parser read
// from a tcp_stream, a string response written): its compile cost, for beast_parsers_ab.sh.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "lib/metrics/http_server.cc"

namespace ferry::metrics {

void beast_session_probe(boost::asio::io_context& io) {
  namespace bh = boost::beast::http;
  auto stream = std::make_shared<boost::beast::tcp_stream>(io);
  auto buffer = std::make_shared<boost::beast::flat_buffer>();
  auto parser = std::make_shared<bh::request_parser<bh::empty_body>>();
  parser->header_limit(24 * 1024);
  bh::async_read_header(
      *stream, *buffer, *parser, [stream, buffer, parser](boost::beast::error_code, std::size_t) {
        auto res = std::make_shared<bh::response<bh::string_body>>(bh::status::ok, 11);
        res->body() = "ok\n";
        res->prepare_payload();
        bh::async_write(*stream, *res, [stream, res](boost::beast::error_code, std::size_t) {});
      });
}

}  // namespace ferry::metrics
