// Who may hold how many control connections (docs/control-protocol.md, "Connection budgets"):
// admin peers may take every slot; ordinary local peers share what the admin reserve and the
// unauthenticated pool leave, each uid within a budget of its own; unauthenticated TCP connections
// hold a small pool of their own, each source address within its budget. Pure accounting: no
// sockets, no clocks, so every rule is testable on its own.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "lib/common/keyed_budget.hh"
#include "lib/common/lease.hh"

namespace ferry::control {

struct PeerBudgetLimits {
  std::size_t max_connections = 1024;  // every connection, of every class
  std::size_t admin_reserved = 64;     // slots only admin peers may take
  std::size_t per_uid = 32;            // connections one non-admin uid may hold
  std::size_t unauthenticated = 64;    // the pool of TCP connections before auth; 0: TCP is off
  std::size_t unauthenticated_per_source = 8;  // of that pool, per source address
};

// admin: root, the daemon's uid, an authenticated TCP client; local: any other uid on the Unix
// socket; unauthenticated: a TCP connection that has not sent its token yet.
enum class PeerClass { admin, local, unauthenticated };

// Why a connection was refused, most specific first; also the label `reason` of
// ferry_control_rejected_connections_total.
enum class Refusal {
  per_uid,          // its uid holds its whole budget
  per_source,       // its source address holds its share of the unauthenticated pool
  reserved,         // the local peers' share is taken; the rest is reserved for admins
  unauthenticated,  // the unauthenticated pool is taken
  limit,            // every slot is taken
};
inline constexpr Refusal kRefusals[] = {Refusal::per_uid, Refusal::per_source, Refusal::reserved,
                                        Refusal::unauthenticated, Refusal::limit};
std::string_view to_string(Refusal refusal);

struct PeerSlot {
  PeerClass peer_class = PeerClass::admin;
  uid_t uid = 0;       // local
  std::string source;  // unauthenticated: the source address
};

class PeerBudget;
using PeerLease = Lease<PeerBudget, PeerSlot>;
using PeerAdmission = std::variant<PeerLease, Refusal>;

class PeerBudget {
 public:
  // Limits an operator could not have meant (a reserve and pool as large as the total, a
  // budget of 0) are clamped so that every class keeps at least what the rules promise it.
  explicit PeerBudget(const PeerBudgetLimits& limits);
  PeerBudget(const PeerBudget&) = delete;
  PeerBudget& operator=(const PeerBudget&) = delete;

  PeerAdmission admit_admin();
  PeerAdmission admit_local(uid_t uid);
  PeerAdmission admit_unauthenticated(const std::string& source);
  // An unauthenticated connection sent the right token: it leaves the pool and its source's
  // budget and becomes an admin connection, in the same slot of the total.
  void promote_to_admin(PeerLease& lease);

  const PeerBudgetLimits& limits() const { return limits_; }
  // How many local connections all uids together may hold.
  std::size_t local_share() const { return local_share_; }
  std::size_t open() const { return admin_ + local_ + unauthenticated_; }
  std::size_t open(PeerClass peer_class) const;
  std::size_t held_by_uid(uid_t uid) const { return per_uid_.held(uid); }
  std::size_t held_by_source(const std::string& source) const { return per_source_.held(source); }

  // Why `source` (as logs name the peer) was refused, with the config key that sets the budget.
  std::string explain(Refusal refusal, const std::string& source) const;

  // A lease's end; call it only through PeerLease.
  void release(const PeerSlot& slot);

 private:
  PeerLease lease(PeerSlot slot);

  PeerBudgetLimits limits_;
  std::size_t local_share_;
  std::size_t admin_ = 0;
  std::size_t local_ = 0;
  std::size_t unauthenticated_ = 0;
  KeyedBudget<uid_t> per_uid_;
  KeyedBudget<std::string> per_source_;
};

}  // namespace ferry::control
