// The control server's own counters and their collector.
#include "lib/control/control_counters.hh"

namespace ferry::control {
namespace {

constexpr std::string_view kUnknownCommand = "unknown";

}  // namespace

ControlCounters::ControlCounters(const CommandTable& commands) {
  for (const auto& [name, command] : commands.all()) requests_.try_emplace(name);
  requests_.try_emplace(std::string(kUnknownCommand));
}

void ControlCounters::request(std::string_view cmd, bool ok) {
  auto it = requests_.find(cmd.empty() ? kUnknownCommand : cmd);
  if (it == requests_.end()) it = requests_.find(kUnknownCommand);
  (ok ? it->second.ok : it->second.error).add();
}

void ControlCounters::connection(Transport transport) {
  (transport == Transport::tcp ? connections_tcp_ : connections_unix_).add();
}

void ControlCounters::collect(metrics::SnapshotBuilder& builder) const {
  const std::string requests = "ferry_control_requests_total";
  const std::string requests_help =
      "Control requests answered, by command (\"unknown\" when none was recognised) and result.";
  for (const auto& [cmd, results] : requests_) {
    builder.counter(requests, requests_help, {{"cmd", cmd}, {"result", "ok"}},
                    static_cast<double>(results.ok.value()));
    builder.counter(requests, requests_help, {{"cmd", cmd}, {"result", "error"}},
                    static_cast<double>(results.error.value()));
  }

  const std::string bad = "ferry_control_bad_requests_total";
  const std::string bad_help = "Control request lines rejected before reaching a command.";
  builder.counter(bad, bad_help, {{"reason", "bad_request"}},
                  static_cast<double>(bad_request.value()));
  builder.counter(bad, bad_help, {{"reason", "too_large"}}, static_cast<double>(too_large.value()));

  const std::string connections = "ferry_control_connections_total";
  const std::string connections_help = "Control connections accepted, by transport.";
  builder.counter(connections, connections_help, {{"transport", "unix"}},
                  static_cast<double>(connections_unix_.value()));
  builder.counter(connections, connections_help, {{"transport", "tcp"}},
                  static_cast<double>(connections_tcp_.value()));

  builder.gauge("ferry_control_connections_open", "Control connections open now.", {},
                static_cast<double>(connections_open.value()));

  const std::string rejected = "ferry_control_rejected_connections_total";
  const std::string rejected_help =
      "Control connections refused or closed by the server: over a connection budget (limit, "
      "reserved, per_uid, unauthenticated, per_source), a client not reading its responses, a "
      "failed TCP authentication, or no auth line in time.";
  for (Refusal refusal : kRefusals) {
    builder.counter(rejected, rejected_help, {{"reason", std::string(to_string(refusal))}},
                    static_cast<double>(rejected_budget_[index(refusal)].value()));
  }
  builder.counter(rejected, rejected_help, {{"reason", "slow_reader"}},
                  static_cast<double>(rejected_slow_reader.value()));
  builder.counter(rejected, rejected_help, {{"reason", "auth"}},
                  static_cast<double>(rejected_auth.value()));
  builder.counter(rejected, rejected_help, {{"reason", "auth_timeout"}},
                  static_cast<double>(rejected_auth_timeout.value()));
}

}  // namespace ferry::control
