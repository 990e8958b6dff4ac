// A Beast 1.74 basic_parser that reads one message head and ignores the rest: the base of the
// Beast versions of ferry's parsers in beast_request.cc and beast_status.cc.
#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <cstdint>

namespace ferry::bench {

template <bool isRequest>
class BeastHeadParser : public boost::beast::http::basic_parser<isRequest> {
 protected:
  using string_view = boost::beast::string_view;
  using error_code = boost::beast::error_code;
  using field = boost::beast::http::field;
  using verb = boost::beast::http::verb;

  void on_request_impl(verb, string_view, string_view, int, error_code&) override {}
  void on_response_impl(int, string_view, int, error_code&) override {}
  void on_field_impl(field, string_view, string_view, error_code&) override {}
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  std::size_t on_body_impl(string_view, error_code&) override { return 0; }
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view, error_code&) override { return 0; }
  void on_finish_impl(error_code&) override {}
};

}  // namespace ferry::bench
