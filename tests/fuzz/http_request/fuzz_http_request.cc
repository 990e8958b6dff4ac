// libFuzzer target for the /metrics request parser (lib/metrics/http_request): any bytes are a
// request, a valid prefix of one, or an error with a status; the verdict on a prefix never
// contradicts the verdict on the whole, and no input makes the parser wait without bound.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

#include "lib/metrics/http_request.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::metrics::http;

// The most a request head that is still arriving may hold: empty lines up to the request-line
// limit, the request line with its CRLF, and the header budget (which includes the final CRLF).
constexpr std::size_t kMaxPendingBytes =
    kMaxRequestLineBytes + 2 + kMaxRequestLineBytes + 2 + kMaxHeaderBytes;

bool same_request(const Request& a, const Request& b) {
  return a.method == b.method && a.target == b.target && a.version_minor == b.version_minor &&
         a.header_count == b.header_count && a.keep_alive == b.keep_alive &&
         a.request_bytes == b.request_bytes;
}

void check_request(const Request& r, std::size_t size) {
  FUZZ_CHECK(r.method == "GET" || r.method == "HEAD");
  FUZZ_CHECK(r.version_minor == 0 || r.version_minor == 1);
  FUZZ_CHECK(!r.target.empty() && r.target.front() == '/');
  FUZZ_CHECK(r.target.starts_with(r.path()) && r.path().find('?') == std::string_view::npos);
  FUZZ_CHECK(r.header_count <= kMaxHeaderCount);
  FUZZ_CHECK(r.request_bytes >= 18 && r.request_bytes <= size);  // "GET / HTTP/1.0\r\n\r\n"
  FUZZ_CHECK(!r.keep_alive || r.version_minor == 1);
}

// What a prefix of `whole` (parsed as `full`) may parse to: while a request is still arriving,
// NeedMore; once its head is complete, that same request; an error may show early but not change.
void check_prefix(std::string_view whole, const ParseResult& full, std::size_t cut) {
  ParseResult part = parse_request(whole.substr(0, cut));
  if (const auto* r = std::get_if<Request>(&full)) {
    if (cut < r->request_bytes) {
      FUZZ_CHECK(std::holds_alternative<NeedMore>(part));
    } else {
      const auto* p = std::get_if<Request>(&part);
      FUZZ_CHECK(p != nullptr && same_request(*p, *r));
    }
  } else if (std::holds_alternative<NeedMore>(full)) {
    FUZZ_CHECK(std::holds_alternative<NeedMore>(part));
  } else {
    const auto& e = std::get<ParseError>(full);
    const auto* p = std::get_if<ParseError>(&part);
    FUZZ_CHECK(std::holds_alternative<NeedMore>(part) || (p != nullptr && p->status == e.status));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const ParseResult full = parse_request(in);
  if (const auto* r = std::get_if<Request>(&full)) {
    check_request(*r, size);
  } else if (const auto* e = std::get_if<ParseError>(&full)) {
    FUZZ_CHECK(e->status == 400 || e->status == 405 || e->status == 413 || e->status == 414 ||
               e->status == 431 || e->status == 505);
    FUZZ_CHECK(!e->reason.empty());
  } else {
    FUZZ_CHECK(size <= kMaxPendingBytes);
  }

  // Every prefix of a short input, and 64 spread over a long one: the server parses whatever
  // has arrived, so the verdict must not depend on where the reads happened to split.
  const std::size_t step = size <= 256 ? 1 : size / 64;
  for (std::size_t cut = 0; cut < size; cut += step) check_prefix(in, full, cut);
  return 0;
}
