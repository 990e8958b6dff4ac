// udp: send "send" and pass on any reply, or on one that starts with "expect" when it is set.
#include <algorithm>

#include "lib/health/check_datagram.hh"

namespace ferry::health {
namespace {

class UdpCheck final : public DatagramCheck {
 public:
  UdpCheck(const CheckAddress& target, const config::HealthCheckConfig& params)
      : DatagramCheck(target, params.send), expect_(params.expect) {}

 private:
  // The first reply decides: a backend that answers something else is failing, not slow.
  std::optional<CheckOutcome> judge(std::span<const std::uint8_t> reply) override {
    if (expect_ &&
        (reply.size() < expect_->size() ||
         !std::equal(expect_->begin(), expect_->end(), reply.begin(),
                     [](char e, std::uint8_t r) { return static_cast<std::uint8_t>(e) == r; }))) {
      return CheckOutcome{CheckResult::error, "reply did not start with expect"};
    }
    return CheckOutcome{CheckResult::ok, "reply of " + std::to_string(reply.size()) + " bytes"};
  }

  std::optional<std::string> expect_;
};

}  // namespace

std::unique_ptr<Check> make_udp_check(const CheckAddress& target,
                                      const config::HealthCheckConfig& params) {
  return std::make_unique<UdpCheck>(target, params);
}

}  // namespace ferry::health
