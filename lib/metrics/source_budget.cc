// The metrics endpoint's connection budget: a total and a share per client address.
#include "lib/metrics/source_budget.hh"

#include <algorithm>

namespace ferry::metrics {

std::string_view to_string(SourceRefusal refusal) {
  return refusal == SourceRefusal::per_source ? "per_source" : "limit";
}

SourceBudget::SourceBudget(std::size_t max_connections, std::size_t per_source)
    : max_connections_(std::max<std::size_t>(max_connections, 1)),
      per_source_(std::max<std::size_t>(per_source, 1)) {}

SourceAdmission SourceBudget::admit(const std::string& source) {
  if (per_source_.full(source)) return SourceRefusal::per_source;
  if (open_ >= max_connections_) return SourceRefusal::limit;
  ++open_;
  per_source_.take(source);
  return SourceLease(*this, source);
}

void SourceBudget::release(const std::string& source) {
  --open_;
  per_source_.give_back(source);
}

}  // namespace ferry::metrics
