// One part of the daemon that starts, follows the configuration, stops and is handed over to
// the next ferryd: control, metrics, xdp, fastpath, health, announce, tcp. The daemon runs them
// as one ordered list (plane_list.hh).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "lib/config/config.hh"
#include "lib/handover/offer.hh"

namespace ferry::lifecycle {

// What applying a configuration reports beyond success: keys that take effect only after a
// restart, errors that did not reject it (a TCP listener that could not be bound), and any
// plane's own account by its name (the reload's answer shows "tcp").
struct ApplyNotes {
  std::vector<std::string> restart_required;
  std::vector<std::string> errors;
  nlohmann::json details = nlohmann::json::object();

  // Notes `key` as taking effect only at restart when its value differs between the running
  // config and the next one.
  template <typename T>
  void restart_if_changed(const char* key, const T& running, const T& next) {
    if (running != next) restart_required.emplace_back(key);
  }
};

// Threads: start(), serve() and stop() run on the supervisor while the control thread is not
// running (before it starts, after it is joined); every other call runs on the control thread.
// A plane's own callbacks from other threads (health transitions, link events) post to the
// control thread and touch the plane there. Every `config` is the effective one: the
// operator's steering (lib/admin) applied.
class Plane {
 public:
  virtual ~Plane() = default;

  // The plane's name, in logs and as its part's name in a handover offer.
  virtual std::string_view name() const = 0;
  // Brings the plane up for `config`: afresh when `handed` is null, else on the kernel objects
  // and state in its part of the running ferryd's offer, taking over without disturbing what
  // that one serves. Throws with the reason, having released whatever it set up itself.
  virtual void start(const config::Config& config, handover::OfferPart* handed) = 0;
  // Every plane has started: take new work. After a takeover, `paused` is the plane's part of
  // what the running ferryd's stopped planes carried (pause()); null when starting afresh.
  virtual void serve(handover::OfferPart* /*paused*/) {}

  // A reload, in two steps so it is all or nothing: prepare() checks that `next` can be applied
  // and throws with the reason if not, changing nothing; commit() applies it.
  virtual void prepare(const config::Config& /*next*/) {}
  virtual void commit(const config::Config& next, ApplyNotes& notes) = 0;

  // Takes the plane down: what start() set up, in reverse. Idempotent.
  virtual void stop() = 0;

  // The running ferryd's side of a handover: describe() writes the plane's part of the offer
  // (duplicates of its fds: it serves on meanwhile); pause() stops what cannot run in two
  // processes at once and writes what it carried; release(), once the successor serves or a
  // takeover fails, leaves the kernel objects to whoever owns them now and stops taking work.
  virtual void describe(handover::OfferPart& part) = 0;
  virtual void pause(handover::OfferPart& /*part*/) {}
  virtual void release() = 0;
};

}  // namespace ferry::lifecycle
