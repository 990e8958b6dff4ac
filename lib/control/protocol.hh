// The control protocol codec: one JSON object per line in each direction.
//   request  {"id":N,"cmd":"stats","args":{...}}
//   response {"id":N,"ok":true,"result":{...}}
//         or {"id":N,"ok":false,"error":{"code":..,"message":..}}
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ferry::control {

inline constexpr std::size_t kMaxRequestBytes = 64 * 1024;  // one line, without the newline
inline constexpr std::size_t kMaxCommandNameBytes = 32;

struct Request {
  nlohmann::json id;  // integer or null (absent); echoed back
  std::string cmd;
  nlohmann::json args = nlohmann::json::object();
};

// An error that becomes {"ok":false,"error":{code,message}}. Codes used (docs/control-protocol.md
// lists them): bad_request, unknown_command, bad_args, permission_denied, unauthorized, too_large,
// internal, rejected, not_found, busy, failed.
class CommandError : public std::runtime_error {
 public:
  CommandError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

// Parses one request line. Throws CommandError("bad_request", ...) with the best id it could
// recover in `id_out` (null when none) so the error response still carries it.
Request decode_request(std::string_view line, nlohmann::json& id_out);

// [a-z_]{1,32}: the names a request's "cmd" may carry and a CommandTable accepts.
bool is_valid_command_name(std::string_view name);

std::string encode_result(const nlohmann::json& id, const nlohmann::json& result);
std::string encode_error(const nlohmann::json& id, std::string_view code, std::string_view message);

}  // namespace ferry::control
