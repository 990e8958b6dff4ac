// The handover's typed messages: what a running ferryd hands the ferryd that takes over, one
// part per plane (control, metrics, xdp, fastpath, ...), each plane writing and reading only its
// own part, its descriptors named (never numbered by hand), the whole versioned by a schema.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "lib/common/unique_fd.hh"
#include "lib/handover/channel.hh"

namespace ferry::handover {

// The offer's schema. 1 was the untyped offer of the ferryd before it (no "schema" key, fds by
// index); 2 is this one. Raise it whenever a part changes meaning: a ferryd reads only its own.
inline constexpr int kOfferSchema = 2;

// An offer that cannot be read or used: a schema this ferryd does not read, a part or a
// descriptor missing, a malformed head. The message says what, for the running ferryd's log.
class OfferError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One plane's part: plain fields, bulk bytes, and descriptors under names the plane chose
// ("unix", "map:services", "xsk:1:0").
class OfferPart {
 public:
  nlohmann::json fields = nlohmann::json::object();
  std::vector<std::byte> bytes;

  // Keeps `fd` under `name` (nothing for an empty fd); a name used twice throws OfferError.
  void put_fd(std::string name, UniqueFd fd);
  // Takes the fd named `name`: an empty one when the part has none of that name.
  UniqueFd take_fd(std::string_view name);
  // Like take_fd(), but a missing fd throws OfferError naming it.
  UniqueFd require_fd(std::string_view name);
  std::size_t fd_count() const { return fds_.size(); }
  const std::map<std::string, UniqueFd, std::less<>>& fds() const { return fds_; }

 private:
  std::map<std::string, UniqueFd, std::less<>> fds_;
};

// One message of parts: the offer (the kernel objects and state, before the pause) or the
// pause (what the stopped workers carried, with the time they stopped).
class Offer {
 public:
  std::string stage = "offer";  // "offer" | "paused": the head's "type"
  std::string version;          // the sending ferryd's FERRY_VERSION
  int from_pid = 0;
  std::uint64_t at_ns = 0;  // shared_clock_ns() of the pause ("paused" only)

  // The writer's side: `plane`'s part, created empty on first use.
  OfferPart& part(std::string_view plane);
  // The reader's side: `plane`'s part, moved out. A part the offer lacks throws OfferError
  // naming the plane.
  OfferPart take_part(std::string_view plane);
  bool has_part(std::string_view plane) const { return parts_.contains(plane); }
  std::vector<std::string> planes() const;
  std::size_t fd_count() const;

  // For the channel: the head, the body, and the fds in the order the head numbers them (they
  // stay owned here; the peer receives copies).
  struct Wire {
    nlohmann::json head;
    std::vector<std::byte> body;
    std::vector<int> fds;
  };
  Wire encode() const;
  // A received message as an offer of `stage`: refuses (OfferError) another stage, an offer
  // without a schema or of another schema than kOfferSchema, and fd numbers or byte ranges
  // that do not fit what came.
  static Offer decode(Message message, std::string_view stage);

 private:
  std::map<std::string, OfferPart, std::less<>> parts_;
};

}  // namespace ferry::handover
