// The control server's own counters, written only on the control thread and read by the metrics
// registry's collector (any thread may read; the label sets are fixed at construction).
#pragma once

#include <array>
#include <map>
#include <string>
#include <string_view>

#include "lib/control/commands.hh"
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
  metrics::Counter rejected_limit;  // ferry_control_rejected_connections_total{reason="limit"}
  metrics::Counter rejected_slow_reader;  // {reason="slow_reader"}
  metrics::Counter rejected_auth;         // {reason="auth"}

  void collect(metrics::SnapshotBuilder& builder) const;

 private:
  struct Results {
    metrics::Counter ok;
    metrics::Counter error;
  };
  std::map<std::string, Results, std::less<>> requests_;
  metrics::Counter connections_unix_;
  metrics::Counter connections_tcp_;
};

}  // namespace ferry::control
