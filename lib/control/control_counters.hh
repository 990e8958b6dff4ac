// The control server's own counters, written only on the control thread and read by the metrics
// registry's collector (any thread may read; the label sets are fixed at construction).
#pragma once

#include <array>
#include <iterator>
#include <map>
#include <string>
#include <string_view>

#include "lib/control/commands.hh"
#include "lib/control/peer_budget.hh"
#include "lib/metrics/registry.hh"

namespace ferry::control {

enum class Transport { unix_socket, tcp };

class ControlCounters {
 public:
  // One requests_total label set per command in `commands` and one for cmd="unknown"; commands
  // added to the table later are counted as "unknown".
  explicit ControlCounters(const CommandTable& commands);

  // `cmd` is DispatchOutcome::cmd: empty for lines that named no known command.
  void request(std::string_view cmd, bool ok);
  void connection(Transport transport);

  metrics::Counter bad_request;  // ferry_control_bad_requests_total{reason="bad_request"}
  metrics::Counter too_large;    // {reason="too_large"}
  metrics::Gauge connections_open;
  // ferry_control_rejected_connections_total{reason=to_string(refusal)}: over a budget at accept.
  metrics::Counter& rejected(Refusal refusal) { return rejected_budget_[index(refusal)]; }
  metrics::Counter rejected_slow_reader;   // {reason="slow_reader"}
  metrics::Counter rejected_auth;          // {reason="auth"}
  metrics::Counter rejected_auth_timeout;  // {reason="auth_timeout"}

  void collect(metrics::SnapshotBuilder& builder) const;

 private:
  struct Results {
    metrics::Counter ok;
    metrics::Counter error;
  };
  static std::size_t index(Refusal refusal) { return static_cast<std::size_t>(refusal); }

  std::map<std::string, Results, std::less<>> requests_;
  std::array<metrics::Counter, std::size(kRefusals)> rejected_budget_;
  metrics::Counter connections_unix_;
  metrics::Counter connections_tcp_;
};

}  // namespace ferry::control
