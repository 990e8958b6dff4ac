// The configuration the data planes serve: the file's, with the operator's run-time steering
// applied to the backends' weights (drain and disable weigh 0 for new flows and connections).
#pragma once

#include "lib/admin/admin_board.hh"
#include "lib/config/config.hh"

namespace ferry::admin {

config::Config effective_config(const config::Config& config, const AdminBoard& board);

// Whether `backend` of `service` may keep its established UDP flows: not when disabled.
bool keeps_flows(const AdminBoard& board, const std::string& service, const net::Endpoint& backend);

}  // namespace ferry::admin
