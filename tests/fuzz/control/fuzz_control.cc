// libFuzzer target for the control protocol codec (lib/control/protocol, json_line, and the TCP
// auth line of tcp_auth): any line decodes to a well-formed Request or is refused with a
// CommandError, and the response either way is one line of JSON that carries the request's id back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "lib/control/json_line.hh"
#include "lib/control/protocol.hh"
#include "lib/control/tcp_auth.hh"
#include "tests/fuzz/fuzz_check.hh"

namespace {

using namespace ferry::control;
using json = nlohmann::json;

// What the server writes back must be one line that any client can parse, with the same id.
void check_response(const std::string& line, const json& id) {
  FUZZ_CHECK(line.find('\n') == std::string::npos);
  std::string why;
  auto parsed = parse_json_line(line, why);
  FUZZ_CHECK(parsed && parsed->is_object());
  FUZZ_CHECK(parsed->contains("id") && (*parsed)["id"] == id);
  FUZZ_CHECK(parsed->contains("ok") && (*parsed)["ok"].is_boolean());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);

  // The line parser alone: never throws, and says why when it refuses.
  std::string why;
  auto parsed = parse_json_line(line, why);
  FUZZ_CHECK(parsed.has_value() || !why.empty());

  // The first line a TCP client sends, before it is trusted with anything: a token or nothing,
  // and the token compares equal to itself only.
  if (std::optional<std::string> token = parse_auth_line(line)) {
    FUZZ_CHECK(parsed && parsed->is_object() && parsed->size() == 1);
    FUZZ_CHECK(token_matches(*token, *token));
    FUZZ_CHECK(!token_matches(*token, *token + "x") && !token_matches(*token + "x", *token));
  }

  json id;
  Request request;
  try {
    request = decode_request(line, id);
  } catch (const CommandError& e) {
    FUZZ_CHECK(e.code() == "bad_request" || e.code() == "bad_args" || e.code() == "too_large");
    FUZZ_CHECK(id.is_null() || id.is_number_integer());
    check_response(encode_error(id, e.code(), e.what()), id);
    return 0;
  }
  FUZZ_CHECK(parsed.has_value());  // decode_request accepts no line the line parser refuses
  FUZZ_CHECK(is_valid_command_name(request.cmd));
  FUZZ_CHECK(request.args.is_object());
  FUZZ_CHECK(request.id == id && (id.is_null() || id.is_number_integer()));
  check_response(encode_result(id, request.args), id);

  // The request written back out in canonical form decodes to the same request.
  json canonical = {{"cmd", request.cmd}, {"args", request.args}};
  if (!id.is_null()) canonical["id"] = id;
  const std::string again_line = canonical.dump();
  if (again_line.size() <= kMaxRequestBytes) {
    json again_id;
    Request again;
    try {
      again = decode_request(again_line, again_id);
    } catch (const CommandError&) {
      FUZZ_CHECK(false);
    }
    FUZZ_CHECK(again.cmd == request.cmd && again.args == request.args && again_id == id);
  }
  return 0;
}
