// The daemon's control command table: names, access levels, summaries and argument checks; what
// each command reads or sets going is the CommandTarget's.
#include "lib/lifecycle/control_commands.hh"

#include <fmt/format.h>

#include <algorithm>

#include "lib/control/protocol.hh"
#include "lib/metrics/prometheus.hh"

namespace ferry::lifecycle {

using nlohmann::json;

void register_daemon_commands(control::CommandTable& table, CommandTarget& daemon) {
  using control::Access;
  control::add_help_command(table);

  table.add("announce", Access::read,
            "the VIPs this host announces through the routing daemon, and why",
            [&daemon](const json&, const control::Peer&) { return daemon.announce_report(); });

  table.add("status", Access::read, "daemon state, versions, interfaces and reload history",
            [&daemon](const json&, const control::Peer&) { return daemon.status_report(); });

  table.add(
      "upgrade", Access::admin,
      "hand over to the ferryd binary on disk without dropping traffic; replies at once "
      "with the new pid (status.upgrade follows it)",
      [&daemon](const json&, const control::Peer& peer) {
        return daemon.start_upgrade(fmt::format("ferryctl by uid {} pid {}", peer.uid, peer.pid));
      });
  // The control server hands a Unix peer's well-formed {"cmd":"handover"} to the upgrade before
  // it gets here (ControlServer::set_socket_taker): what reaches the table is anything else.
  table.add("handover", Access::admin,
            "asked by a new ferryd (--takeover) for this one's sockets; not for operators",
            [](const json&, const control::Peer&) -> json {
              throw control::CommandError("bad_request",
                                          "handover is asked for by `ferryd --takeover` over the "
                                          "Unix socket; use `ferryctl upgrade`");
            });

  table.add("stats", Access::read,
            "every metric as a snapshot; args {\"prefix\":\"ferry_xdp\"} filters by name",
            [&daemon](const json& args, const control::Peer&) {
              std::string prefix;
              if (args.contains("prefix")) {
                if (!args["prefix"].is_string()) {
                  throw control::CommandError("bad_args", "args.prefix must be a string");
                }
                prefix = args["prefix"].get<std::string>();
              }
              auto snapshot = daemon.metrics_registry().snapshot();
              std::erase_if(snapshot, [&](const metrics::Family& f) {
                return f.name.compare(0, prefix.size(), prefix) != 0;
              });
              return metrics::encode_json(snapshot);
            });

  table.add("services", Access::read, "configured services and their backends",
            [&daemon](const json&, const control::Peer&) { return daemon.services_report(); });

  table.add("workers", Access::read, "the daemon's threads and their liveness",
            [&daemon](const json&, const control::Peer&) { return daemon.workers_report(); });

  table.add("config", Access::read, "the effective running configuration, defaults filled in",
            [&daemon](const json&, const control::Peer&) {
              return json{{"path", daemon.config_file()},
                          {"config", config::to_json(daemon.running_config())}};
            });

  add_backend_command(table, daemon);

  table.add(
      "reload", Access::admin,
      "re-read the config file; an invalid file is rejected and the running one stays",
      [&daemon](const json&, const control::Peer& peer) {
        return daemon.reload(fmt::format("ferryctl reload by uid {} pid {}", peer.uid, peer.pid));
      });
}

}  // namespace ferry::lifecycle
