// The command table and the request boundary: every failure of a request, expected or not,
// becomes an error response here, so nothing a client sends can take the control thread down.
#include "lib/control/commands.hh"

#include <fmt/format.h>

#include <stdexcept>

#include "lib/control/protocol.hh"

namespace ferry::control {
namespace {

// The response when even encoding an error failed (out of memory): a constant, so it cannot.
constexpr std::string_view kLastResortResponse =
    R"({"id":null,"ok":false,"error":{"code":"internal","message":"could not encode the response"}})";

}  // namespace

std::string_view to_string(Access access) {
  return access == Access::admin ? "admin" : "read";
}

bool AccessPolicy::allows(const Peer& peer, Access needed) const {
  if (needed == Access::read) return true;
  return peer.tcp || peer.uid == 0 || peer.uid == daemon_uid_;
}

void CommandTable::add(const std::string& name, Access access, std::string summary,
                       Handler handler) {
  if (!is_valid_command_name(name)) {
    throw std::invalid_argument(fmt::format("command name '{}' is not [a-z_]{{1,32}}", name));
  }
  if (!handler) throw std::invalid_argument(fmt::format("command '{}' has no handler", name));
  auto [it, inserted] =
      commands_.try_emplace(name, Command{access, std::move(summary), std::move(handler)});
  if (!inserted) throw std::invalid_argument(fmt::format("command '{}' added twice", name));
}

const Command* CommandTable::find(const std::string& name) const {
  auto it = commands_.find(name);
  return it == commands_.end() ? nullptr : &it->second;
}

std::string dispatch(const CommandTable& table, const AccessPolicy& policy, const Peer& peer,
                     std::string_view line) {
  DispatchOutcome outcome;
  return dispatch(table, policy, peer, line, outcome);
}

std::string dispatch(const CommandTable& table, const AccessPolicy& policy, const Peer& peer,
                     std::string_view line, DispatchOutcome& outcome) {
  outcome = DispatchOutcome{};
  nlohmann::json id;
  try {
    try {
      Request request = decode_request(line, id);
      const Command* command = table.find(request.cmd);
      if (command == nullptr) {
        throw CommandError("unknown_command",
                           fmt::format("unknown command '{}'; try 'help'", request.cmd));
      }
      outcome.cmd = request.cmd;
      if (!policy.allows(peer, command->access)) {
        throw CommandError("permission_denied",
                           fmt::format("'{}' needs admin access, which uid {} does not have: "
                                       "admin commands need root or the daemon's uid",
                                       request.cmd, peer.uid));
      }
      nlohmann::json result = command->handler(request.args, peer);
      std::string response = encode_result(id, result);
      outcome.ok = true;
      return response;
    } catch (const CommandError& e) {
      outcome.error_code = e.code();
      return encode_error(id, e.code(), e.what());
    } catch (const std::exception& e) {
      outcome.error_code = "internal";
      return encode_error(id, "internal", e.what());
    } catch (...) {
      outcome.error_code = "internal";
      return encode_error(id, "internal", "the command failed with an unknown exception");
    }
  } catch (...) {
    outcome.ok = false;
    outcome.error_code = "internal";
    return std::string(kLastResortResponse);
  }
}

void add_help_command(CommandTable& table) {
  const CommandTable* commands = &table;
  table.add("help", Access::read, "list the commands, their access level and what they do",
            [commands](const nlohmann::json&, const Peer&) {
              nlohmann::json list = nlohmann::json::array();
              for (const auto& [name, command] : commands->all()) {
                list.push_back({{"name", name},
                                {"access", std::string(to_string(command.access))},
                                {"summary", command.summary}});
              }
              return nlohmann::json{{"commands", std::move(list)}};
            });
}

}  // namespace ferry::control
