// The operator's steering in a handover offer (see admin_part.hh).
#include "lib/lifecycle/admin_part.hh"

namespace ferry::lifecycle {

using nlohmann::json;

void describe_admin(const admin::AdminBoard& board, handover::OfferPart& part) {
  json backends = json::array();
  for (const admin::BackendSteering& b : board.snapshot()) {
    if (b.admin == admin::BackendAdmin{}) continue;
    backends.push_back({{"service", b.service},
                        {"backend", b.backend.to_string()},
                        {"state", std::string(admin::to_string(b.admin.state))},
                        {"weight", b.admin.weight ? json(*b.admin.weight) : json()}});
  }
  part.fields["backends"] = std::move(backends);
}

void take_admin(admin::AdminBoard& board, const handover::OfferPart& part) {
  for (const json& a : part.fields.value("backends", json::array())) {
    auto backend = net::Endpoint::parse(a.value("backend", ""));
    auto state = admin::parse_admin_state(a.value("state", "enable"));
    if (!backend || !state) continue;
    std::optional<std::uint32_t> weight;
    if (a.contains("weight") && a["weight"].is_number_unsigned()) {
      weight = a["weight"].get<std::uint32_t>();
    }
    board.set(a.value("service", ""), *backend, *state, weight);
  }
}

}  // namespace ferry::lifecycle
