// The table of control commands: name -> access level and handler. The daemon fills it; the
// control server (Unix and TCP) dispatches requests through it after the access check.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace ferry::control {

enum class Access { read, admin };

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
  void add(const std::string& name, Access access, std::string summary, Handler handler);
  const Command* find(const std::string& name) const;
  const std::map<std::string, Command>& all() const { return commands_; }

 private:
  std::map<std::string, Command> commands_;
};

// Decodes `line`, checks access, runs the handler and encodes the response line (no newline).
// Never throws.
std::string dispatch(const CommandTable& table, const AccessPolicy& policy, const Peer& peer,
                     std::string_view line);

}  // namespace ferry::control
