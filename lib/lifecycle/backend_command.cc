// The `backend` control command (admin): drain, disable or enable one backend of one service, or
// set its weight, at run time. The change is applied to both data planes before the answer.
#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "lib/common/log.hh"
#include "lib/control/protocol.hh"
#include "lib/lifecycle/control_commands.hh"

namespace ferry::lifecycle {
namespace {

using json = nlohmann::json;

json steering_json(const admin::BackendSteering& b, health::HealthBoard& health) {
  bool up = health.state(b.service, b.backend)->up.load(std::memory_order_relaxed);
  return {{"service", b.service},
          {"backend", b.backend.to_string()},
          {"admin", std::string(admin::to_string(b.admin.state))},
          {"weight", b.weight()},
          {"configured_weight", b.configured_weight},
          {"health", up ? "up" : "down"},
          {"takes_new_traffic", up && b.balancing_weight() > 0}};
}

struct BackendArgs {
  std::string service;
  net::Endpoint backend;
  std::optional<admin::AdminState> state;
  std::optional<std::uint32_t> weight;
};

// Every check before anything changes: a bad request changes nothing.
BackendArgs parse_backend_args(const json& args) {
  if (!args.is_object()) throw control::CommandError("bad_args", "args must be an object");
  for (const auto& [key, value] : args.items()) {
    if (key != "service" && key != "backend" && key != "state" && key != "weight") {
      throw control::CommandError(
          "bad_args", fmt::format("unknown argument '{}' (service, backend, state, weight)", key));
    }
  }
  BackendArgs out;
  auto text = [&](const char* key) -> std::string {
    auto it = args.find(key);
    if (it == args.end() || !it->is_string()) {
      throw control::CommandError("bad_args", fmt::format("args.{} must be a string", key));
    }
    return it->get<std::string>();
  };
  out.service = text("service");
  std::string backend = text("backend");
  auto endpoint = net::Endpoint::parse(backend);
  if (!endpoint) {
    throw control::CommandError(
        "bad_args",
        fmt::format("args.backend '{}' is not ADDRESS:PORT ([v6]:PORT for IPv6)", backend));
  }
  out.backend = *endpoint;
  if (args.contains("state")) {
    std::string state = text("state");
    out.state = admin::parse_admin_state(state);
    if (!out.state) {
      throw control::CommandError(
          "bad_args", fmt::format("args.state '{}' is not one of drain, disable, enable", state));
    }
  }
  if (auto it = args.find("weight"); it != args.end()) {
    if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > admin::kMaxWeight) {
      throw control::CommandError(
          "bad_args", fmt::format("args.weight must be an integer 0..{}", admin::kMaxWeight));
    }
    out.weight = static_cast<std::uint32_t>(it->get<std::int64_t>());
  }
  if (!out.state && !out.weight) {
    throw control::CommandError("bad_args", "give args.state, args.weight or both");
  }
  return out;
}

}  // namespace

void add_backend_command(control::CommandTable& table, CommandTarget& daemon) {
  table.add("backend", control::Access::admin,
            "drain, disable or enable a backend, or set its weight, until the next restart",
            [&daemon](const json& args, const control::Peer& peer) {
              BackendArgs a = parse_backend_args(args);
              const config::Config& config = daemon.running_config();
              admin::AdminBoard& admin = daemon.admin_board();
              bool service_known = std::any_of(config.services.begin(), config.services.end(),
                                               [&](const auto& s) { return s.name == a.service; });
              if (!service_known) {
                throw control::CommandError("not_found", fmt::format("no service '{}'", a.service));
              }
              std::optional<admin::BackendSteering> before = admin.find(a.service, a.backend);
              if (!before) {
                throw control::CommandError(
                    "not_found", fmt::format("service '{}' has no backend {}; `ferryctl services` "
                                             "lists them",
                                             a.service, a.backend.to_string()));
              }
              admin::BackendSteering after = *admin.set(a.service, a.backend, a.state, a.weight);
              try {
                daemon.apply_steering();
              } catch (const std::exception& e) {
                admin.set(a.service, a.backend, before->admin.state, before->admin.weight);
                try {
                  daemon.apply_steering();
                } catch (const std::exception& again) {
                  log::error("backend: restoring the previous tables failed too: {}", again.what());
                }
                throw control::CommandError("rejected", e.what());
              }
              log::notice("backend {} of {}: {} weight {} (was {} weight {}), by uid {} pid {}",
                          a.backend.to_string(), a.service, admin::to_string(after.admin.state),
                          after.weight(), admin::to_string(before->admin.state), before->weight(),
                          peer.uid, peer.pid);
              return steering_json(after, daemon.health_board());
            });
}

}  // namespace ferry::lifecycle
