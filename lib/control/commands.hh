// The table of control commands: name -> access level and handler. The daemon fills it; the
// control server (Unix and TCP) dispatches requests through it after the access check.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ferry::control {

enum class Access { read, admin };

// "read" | "admin", as shown by `help`.
std::string_view to_string(Access access);

// Who sent a request: SO_PEERCRED for the Unix socket; for TCP, an authenticated token holder.
struct Peer {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  bool tcp = false;  // authenticated by token over TCP; gets admin access
};

// read: any peer that could connect; admin: uid 0, the daemon's own uid, or a TCP token holder.
class AccessPolicy {
 public:
  explicit AccessPolicy(uid_t daemon_uid) : daemon_uid_(daemon_uid) {}
  bool allows(const Peer& peer, Access needed) const;

 private:
  uid_t daemon_uid_;
};

// Handlers run on the control thread; they may throw CommandError (or anything else, which
// becomes an "internal" error) and must not block for long.
using Handler = std::function<nlohmann::json(const nlohmann::json& args, const Peer& peer)>;

struct Command {
  Access access = Access::read;
  std::string summary;  // one line, shown by `help`
  Handler handler;
};

class CommandTable {
 public:
  // Throws std::invalid_argument for a name that is not [a-z_]{1,32} or is already taken.
  void add(const std::string& name, Access access, std::string summary, Handler handler);
  const Command* find(const std::string& name) const;
  const std::map<std::string, Command>& all() const { return commands_; }

 private:
  std::map<std::string, Command> commands_;
};

// What became of one dispatched request, for the server's counters and logs.
struct DispatchOutcome {
  std::string cmd;         // the command's name when it is in the table, otherwise empty
  bool ok = false;         // the response carries a result
  std::string error_code;  // the response's error code when !ok
};

// Decodes `line`, checks access, runs the handler and encodes the response line (no newline).
// Never throws.
std::string dispatch(const CommandTable& table, const AccessPolicy& policy, const Peer& peer,
                     std::string_view line);
std::string dispatch(const CommandTable& table, const AccessPolicy& policy, const Peer& peer,
                     std::string_view line, DispatchOutcome& outcome);

// Registers "help" (read): {"commands":[{"name":..,"access":"read|admin","summary":..}]}, listing
// whatever the table holds when help is asked, so register it once, at any point.
void add_help_command(CommandTable& table);

}  // namespace ferry::control
