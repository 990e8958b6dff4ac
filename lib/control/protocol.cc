// The control protocol codec: strict decoding of one request line, and response encoding that
// cannot fail on whatever bytes a message happens to carry.
#include "lib/control/protocol.hh"

#include <fmt/format.h>

#include <cstdint>
#include <limits>
#include <optional>

#include "lib/control/json_line.hh"

namespace ferry::control {
namespace {

using json = nlohmann::json;

// Dumps without throwing on invalid UTF-8: messages may quote bytes a client sent.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

Request decode_request(std::string_view line, nlohmann::json& id_out) {
  id_out = nullptr;
  if (line.size() > kMaxRequestBytes) {
    throw CommandError("too_large", fmt::format("request line exceeds {} bytes", kMaxRequestBytes));
  }
  if (line.empty()) throw CommandError("bad_request", "empty request");
  std::string why;
  std::optional<json> parsed = parse_json_line(line, why);
  if (!parsed) throw CommandError("bad_request", why);
  json& doc = *parsed;
  if (!doc.is_object()) {
    throw CommandError("bad_request",
                       fmt::format("a request is a JSON object, got {}", doc.type_name()));
  }

  // The id first, so that every later error can still be matched to its request.
  if (auto it = doc.find("id"); it != doc.end() && !it->is_null()) {
    bool fits = it->is_number_integer() &&
                (it->is_number_unsigned()
                     ? it->get<std::uint64_t>() <=
                           static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                     : true);
    if (!fits) {
      throw CommandError("bad_request", "\"id\" must be a 64-bit signed integer or null");
    }
    id_out = it->get<std::int64_t>();
  }

  for (const auto& [key, value] : doc.items()) {
    if (key != "id" && key != "cmd" && key != "args") {
      throw CommandError(
          "bad_request",
          fmt::format("unknown key \"{}\"; a request has only id, cmd and args", key));
    }
  }

  Request request;
  request.id = id_out;
  auto cmd = doc.find("cmd");
  if (cmd == doc.end()) throw CommandError("bad_request", "missing \"cmd\"");
  if (!cmd->is_string()) throw CommandError("bad_request", "\"cmd\" must be a string");
  request.cmd = cmd->get<std::string>();
  if (!is_valid_command_name(request.cmd)) {
    throw CommandError("bad_request", "\"cmd\" must be 1 to 32 characters of a-z and _");
  }

  if (auto args = doc.find("args"); args != doc.end() && !args->is_null()) {
    if (!args->is_object()) {
      throw CommandError("bad_args",
                         fmt::format("\"args\" must be an object, got {}", args->type_name()));
    }
    request.args = std::move(*args);
  }
  return request;
}

bool is_valid_command_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxCommandNameBytes) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || c == '_')) return false;
  }
  return true;
}

std::string encode_result(const nlohmann::json& id, const nlohmann::json& result) {
  // Built by hand: nlohmann objects sort their keys, and the envelope's order is id, ok, result.
  std::string line = "{\"id\":";
  line += dump(id);
  line += ",\"ok\":true,\"result\":";
  line += dump(result);
  line += '}';
  return line;
}

std::string encode_error(const nlohmann::json& id, std::string_view code,
                         std::string_view message) {
  json error = json::object();
  error["code"] = std::string(code);
  error["message"] = std::string(message);
  std::string line = "{\"id\":";
  line += dump(id);
  line += ",\"ok\":false,\"error\":";
  line += dump(error);
  line += '}';
  return line;
}

}  // namespace ferry::control
