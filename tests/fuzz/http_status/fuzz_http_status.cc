// libFuzzer target for the http health check's status-line parser (lib/health/http_status): any
// bytes are a final status, a valid beginning of one, or malformed with a reason; the verdict on
// a prefix never contradicts the verdict on the whole, so how the reads split cannot change it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lib/health/http_status.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using ferry::health::HttpStatus;
using ferry::health::parse_http_status;
using State = HttpStatus::State;

void check_status(const HttpStatus& s) {
  switch (s.state) {
    case State::complete:
      FUZZ_CHECK(s.code >= 200 && s.code <= 599);  // interim 1xx answers are skipped
      break;
    case State::malformed:
      FUZZ_CHECK(!s.why.empty());
      break;
    case State::need_more:
      FUZZ_CHECK(s.code == 0 && s.why.empty());
      break;
  }
}

// What a prefix of the input may parse to: "need more" while the answer is still arriving, the
// same final status once its line is whole, or malformed only when the whole is malformed too.
void check_prefix(std::string_view whole, const HttpStatus& full, std::size_t cut) {
  const HttpStatus part = parse_http_status(whole.substr(0, cut));
  check_status(part);
  if (part.state == State::complete) {
    FUZZ_CHECK(full.state == State::complete && full.code == part.code);
  } else if (part.state == State::malformed) {
    FUZZ_CHECK(full.state == State::malformed);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const HttpStatus full = parse_http_status(in);
  check_status(full);
  // Every prefix of a short input, and 64 spread over a long one (the check reads 4 KiB at most).
  const std::size_t step = size <= 256 ? 1 : size / 64;
  for (std::size_t cut = 0; cut < size; cut += step) check_prefix(in, full, cut);
  return 0;
}
