// How many connections to the metrics endpoint each client address may hold, within a total, so
// that one source cannot take the connections another's scrape needs. Pure accounting.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "lib/common/keyed_budget.hh"
#include "lib/common/lease.hh"

namespace ferry::metrics {

// Why a connection was refused; also the label `reason` of
// ferry_metrics_http_rejected_connections_total.
enum class SourceRefusal {
  per_source,  // its address holds its whole budget (metrics.max_connections_per_source)
  limit,       // every connection is taken (metrics.max_connections)
};
std::string_view to_string(SourceRefusal refusal);

class SourceBudget;
using SourceLease = Lease<SourceBudget, std::string>;
using SourceAdmission = std::variant<SourceLease, SourceRefusal>;

class SourceBudget {
 public:
  // Budgets of 0 are taken as 1.
  SourceBudget(std::size_t max_connections, std::size_t per_source);
  SourceBudget(const SourceBudget&) = delete;
  SourceBudget& operator=(const SourceBudget&) = delete;

  // A lease for `source` (a client address as text), or the reason there is none; a source at
  // its budget is told so even when the total is full too, so the log names who filled it.
  SourceAdmission admit(const std::string& source);

  std::size_t max_connections() const { return max_connections_; }
  std::size_t per_source() const { return per_source_.per_key(); }
  std::size_t open() const { return open_; }
  std::size_t held_by(const std::string& source) const { return per_source_.held(source); }

  // A lease's end; call it only through SourceLease.
  void release(const std::string& source);

 private:
  std::size_t max_connections_;
  std::size_t open_ = 0;
  KeyedBudget<std::string> per_source_;
};

}  // namespace ferry::metrics
