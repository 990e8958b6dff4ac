// The control connection budgets: admission, promotion on authentication, release.
#include "lib/control/peer_budget.hh"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace ferry::control {

std::string_view to_string(Refusal refusal) {
  switch (refusal) {
    case Refusal::per_uid:
      return "per_uid";
    case Refusal::per_source:
      return "per_source";
    case Refusal::reserved:
      return "reserved";
    case Refusal::unauthenticated:
      return "unauthenticated";
    case Refusal::limit:
      return "limit";
  }
  return "limit";
}

namespace {

PeerBudgetLimits clamped(PeerBudgetLimits l) {
  l.max_connections = std::max<std::size_t>(l.max_connections, 1);
  l.admin_reserved = std::clamp<std::size_t>(l.admin_reserved, 1, l.max_connections);
  l.unauthenticated = std::min(l.unauthenticated, l.max_connections - l.admin_reserved);
  l.per_uid = std::max<std::size_t>(l.per_uid, 1);
  l.unauthenticated_per_source = std::max<std::size_t>(l.unauthenticated_per_source, 1);
  return l;
}

}  // namespace

PeerBudget::PeerBudget(const PeerBudgetLimits& limits)
    : limits_(clamped(limits)),
      local_share_(limits_.max_connections - limits_.admin_reserved - limits_.unauthenticated),
      per_uid_(limits_.per_uid),
      per_source_(limits_.unauthenticated_per_source) {}

std::size_t PeerBudget::open(PeerClass peer_class) const {
  switch (peer_class) {
    case PeerClass::admin:
      return admin_;
    case PeerClass::local:
      return local_;
    case PeerClass::unauthenticated:
      return unauthenticated_;
  }
  return 0;
}

PeerLease PeerBudget::lease(PeerSlot slot) {
  switch (slot.peer_class) {
    case PeerClass::admin:
      ++admin_;
      break;
    case PeerClass::local:
      ++local_;
      per_uid_.take(slot.uid);
      break;
    case PeerClass::unauthenticated:
      ++unauthenticated_;
      per_source_.take(slot.source);
      break;
  }
  return PeerLease(*this, std::move(slot));
}

PeerAdmission PeerBudget::admit_admin() {
  if (open() >= limits_.max_connections) return Refusal::limit;
  return lease(PeerSlot{PeerClass::admin, 0, {}});
}

// The most specific reason wins: a uid at its budget is told so even when the share is full too,
// so the log names the peer that filled it.
PeerAdmission PeerBudget::admit_local(uid_t uid) {
  if (per_uid_.full(uid)) return Refusal::per_uid;
  if (local_ >= local_share_) return Refusal::reserved;
  if (open() >= limits_.max_connections) return Refusal::limit;
  return lease(PeerSlot{PeerClass::local, uid, {}});
}

PeerAdmission PeerBudget::admit_unauthenticated(const std::string& source) {
  if (per_source_.full(source)) return Refusal::per_source;
  if (unauthenticated_ >= limits_.unauthenticated) return Refusal::unauthenticated;
  if (open() >= limits_.max_connections) return Refusal::limit;
  return lease(PeerSlot{PeerClass::unauthenticated, 0, source});
}

void PeerBudget::promote_to_admin(PeerLease& lease) {
  if (!lease.held() || lease.slot().peer_class != PeerClass::unauthenticated) return;
  release(lease.slot());
  lease.slot() = PeerSlot{PeerClass::admin, 0, {}};
  ++admin_;
}

void PeerBudget::release(const PeerSlot& slot) {
  switch (slot.peer_class) {
    case PeerClass::admin:
      --admin_;
      break;
    case PeerClass::local:
      --local_;
      per_uid_.give_back(slot.uid);
      break;
    case PeerClass::unauthenticated:
      --unauthenticated_;
      per_source_.give_back(slot.source);
      break;
  }
}

std::string PeerBudget::explain(Refusal refusal, const std::string& source) const {
  const PeerBudgetLimits& l = limits_;
  switch (refusal) {
    case Refusal::per_uid:
      return fmt::format(
          "{}: refusing a control connection: this uid holds {}, its budget "
          "(control.max_connections_per_uid)",
          source, l.per_uid);
    case Refusal::per_source:
      return fmt::format(
          "{}: refusing a TCP control connection: this address holds {} that "
          "have not authenticated, its budget "
          "(control.tcp.max_unauthenticated_per_source)",
          source, l.unauthenticated_per_source);
    case Refusal::reserved:
      return fmt::format(
          "{}: refusing a control connection: peers without admin access hold "
          "{}, their share of control.max_connections; the other {} are kept for "
          "admin peers (control.admin_reserved_connections){}",
          source, local_share_, l.max_connections - local_share_,
          l.unauthenticated == 0 ? ""
                                 : " and TCP clients that have not authenticated "
                                   "yet (control.tcp.max_unauthenticated)");
    case Refusal::unauthenticated:
      return fmt::format(
          "{}: refusing a TCP control connection: {} that have not authenticated "
          "are open, the pool (control.tcp.max_unauthenticated)",
          source, l.unauthenticated);
    case Refusal::limit:
      break;
  }
  return fmt::format(
      "{}: refusing a control connection: {} are open, the limit "
      "(control.max_connections)",
      source, l.max_connections);
}

}  // namespace ferry::control
