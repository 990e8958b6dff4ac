// The part udp and dns checks share: a connected UDP socket sends one datagram and reads replies
// until one is judged; an ICMP port unreachable arrives as ECONNREFUSED and is `refused`.
#pragma once

#include <optional>
#include <span>
#include <string>

#include "lib/health/check.hh"

namespace ferry::health {

class DatagramCheck : public Check {
 public:
  DatagramCheck(const CheckAddress& target, std::string request)
      : target_(target), request_(std::move(request)) {}

  CheckStep start() override;
  CheckStep resume(std::uint32_t events) override;
  std::string timeout_reason(std::uint32_t timeout_ms) const override;

 protected:
  // The outcome a reply decides, or nullopt to ignore it and keep waiting (not an answer to this
  // check's request); `ignored_why` then says why, for the timeout's reason.
  virtual std::optional<CheckOutcome> judge(std::span<const std::uint8_t> reply) = 0;
  const std::string& request() const { return request_; }
  std::string ignored_why_;

 private:
  CheckAddress target_;
  std::string request_;
};

}  // namespace ferry::health
