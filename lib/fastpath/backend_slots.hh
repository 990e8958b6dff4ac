// Which slot of the workers' BackendCounters each (service name, backend address) counts into.
// A pair keeps its slot while any tables that name it live, so its counters, and the rates `top`
// shows, never jump at a reload; a slot is free again only once the last tables naming it are
// freed, which the snapshot board does after every worker has moved past them: by then no worker
// can count into it. Control thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lib/common/net.hh"
#include "lib/fastpath/backend_counters.hh"

namespace ferry::fastpath {

// The slots one build of the tables counts into (ConfigTables::backend_slots), held for as long
// as those tables live. A default one holds none and has serial 0 (tables built without slots).
class BackendSlotLease {
 public:
  BackendSlotLease() = default;
  ~BackendSlotLease() { release(); }
  BackendSlotLease(BackendSlotLease&& o) noexcept;
  BackendSlotLease& operator=(BackendSlotLease&& o) noexcept;
  BackendSlotLease(const BackendSlotLease&) = delete;
  BackendSlotLease& operator=(const BackendSlotLease&) = delete;

  // The slot of backend `backend` of service `service`: the one the pair holds already (in live
  // tables or this lease), else the lowest free one, else packet::kNoCounterSlot (uncounted()).
  std::uint32_t take(const std::string& service, const net::Endpoint& backend);

  // Which build of the tables this is, unique per BackendSlots (from 1): a later fragment counts
  // into the slot its first fragment recorded only under the same tables.
  std::uint64_t serial() const { return serial_; }
  // The slots this lease took that counted for another pair before: the workers' counters still
  // hold that pair's totals, which the collector subtracts (read before the tables are published).
  const std::vector<std::uint32_t>& reused() const { return reused_; }
  // Pairs this lease found no free slot for: counted in the service's totals, not per backend.
  std::uint32_t uncounted() const { return uncounted_; }

 private:
  friend class BackendSlots;
  struct State;
  void release() noexcept;

  std::shared_ptr<State> state_;
  std::vector<std::uint32_t> held_;
  std::vector<std::uint32_t> reused_;
  std::uint32_t uncounted_ = 0;
  std::uint64_t serial_ = 0;
};

// Has a service table built with `options` take its balanced backends' slots from `lease`
// (ServiceTableOptions::counter_slot); the lease must outlive the build.
void take_counter_slots(packet::ServiceTableOptions& options, BackendSlotLease& lease);

class BackendSlots {
 public:
  explicit BackendSlots(std::uint32_t capacity = kBackendSlots);

  // An empty lease for the next build of the tables: take() each of its backends.
  BackendSlotLease lease();

  std::uint32_t capacity() const;
  std::uint32_t used() const;  // held by a live lease
  std::uint32_t free() const { return capacity() - used(); }
  // The slot (service, backend) holds now, if any.
  std::optional<std::uint32_t> slot_of(const std::string& service,
                                       const net::Endpoint& backend) const;

 private:
  std::shared_ptr<BackendSlotLease::State> state_;
};

}  // namespace ferry::fastpath
