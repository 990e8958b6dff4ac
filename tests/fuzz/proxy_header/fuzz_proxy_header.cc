// libFuzzer target for the PROXY protocol header parser (lib/proxy/proxy_header): any bytes are a
// header (v1 or v2) followed by client data, a valid prefix of one, or a rejection with a reason;
// the verdict on a prefix never contradicts the verdict on the whole, the parser never needs more
// than 536 bytes, and what it accepts builds back into a header that parses to the same ends.
#include <cstddef>
#include <cstdint>
#include <span>

#include "lib/proxy/proxy_header.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::proxy::pp;

void check_prefix(std::span<const std::uint8_t> whole, const ParseResult& full, std::size_t cut) {
  const ParseResult part = parse(whole.first(cut));
  if (full.status == Status::done) {
    if (cut < full.consumed) {
      FUZZ_CHECK(part.status == Status::need_more);
    } else {
      FUZZ_CHECK(part.status == Status::done && part.consumed == full.consumed);
      FUZZ_CHECK(part.source == full.source && part.destination == full.destination);
    }
  } else if (full.status == Status::need_more) {
    FUZZ_CHECK(part.status == Status::need_more);
  } else {
    FUZZ_CHECK(part.status == Status::need_more ||
               (part.status == Status::rejected && part.reason == full.reason));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> in(data, size);
  const ParseResult full = parse(in);
  switch (full.status) {
    case Status::need_more:
      FUZZ_CHECK(size < kMaxHeaderBytes);
      break;
    case Status::rejected:
      FUZZ_CHECK(full.reason != Reject::none && full.why != nullptr && full.why[0] != '\0');
      break;
    case Status::done:
      FUZZ_CHECK(full.consumed >= 15 && full.consumed <= size && full.consumed <= kMaxHeaderBytes);
      FUZZ_CHECK(full.version != Version::v1 || full.consumed <= kV1MaxBytes);
      if (full.has_addresses) {
        FUZZ_CHECK(full.source.address.family == full.destination.address.family);
        for (Version v : {Version::v1, Version::v2}) {
          const Built again = build(v, full.source, full.destination);
          const ParseResult back = parse(again.view());
          FUZZ_CHECK(back.status == Status::done && back.consumed == again.size);
          FUZZ_CHECK(back.source == full.source && back.destination == full.destination);
        }
      }
      break;
  }
  // Every prefix of a short input, and 64 spread over a long one: a header may arrive in pieces.
  const std::size_t step = size <= 600 ? 1 : size / 64;
  for (std::size_t cut = 0; cut < size; cut += step) check_prefix(in, full, cut);
  return 0;
}
