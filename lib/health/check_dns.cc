// dns: a query for "name"/"qtype" over UDP with a fresh random id; passes on a reply to it whose
// RCODE is in "rcodes", or that is truncated (the server answered; the rest would need TCP).
#include <random>

#include "lib/health/check_datagram.hh"
#include "lib/health/dns_message.hh"

namespace ferry::health {
namespace {

std::string query_of(const config::HealthCheckConfig& params) {
  std::uint16_t id = static_cast<std::uint16_t>(std::random_device{}());
  auto query = build_dns_query(id, params.name, static_cast<std::uint16_t>(params.qtype));
  // The config refuses names that cannot be encoded; the root stands in if one slips through.
  if (!query) query = build_dns_query(id, ".", static_cast<std::uint16_t>(params.qtype));
  return std::string(query->begin(), query->end());
}

class DnsCheck final : public DatagramCheck {
 public:
  DnsCheck(const CheckAddress& target, const config::HealthCheckConfig& params)
      : DatagramCheck(target, query_of(params)), rcodes_(params.rcodes) {}

 private:
  std::optional<CheckOutcome> judge(std::span<const std::uint8_t> reply) override {
    const std::string& sent = request();
    auto query = std::span(reinterpret_cast<const std::uint8_t*>(sent.data()), sent.size());
    DnsReply r = parse_dns_reply(reply, query);
    switch (r.kind) {
      case DnsReply::Kind::not_ours:
        ignored_why_ = r.why;
        return std::nullopt;
      case DnsReply::Kind::malformed:
        return CheckOutcome{CheckResult::error, "malformed reply: " + r.why};
      case DnsReply::Kind::answer:
        break;
    }
    std::string rcode = "rcode " + dns_rcode_text(r.rcode);
    if (r.truncated) return CheckOutcome{CheckResult::ok, "truncated reply (TC), " + rcode};
    if (r.rcode < 32 && (rcodes_ & (1u << r.rcode))) return CheckOutcome{CheckResult::ok, rcode};
    return CheckOutcome{CheckResult::error, rcode};
  }

  std::uint32_t rcodes_;
};

}  // namespace

std::unique_ptr<Check> make_dns_check(const CheckAddress& target,
                                      const config::HealthCheckConfig& params) {
  return std::make_unique<DnsCheck>(target, params);
}

}  // namespace ferry::health
