// The operator's steering (the `backend` command's drain, disable and weight per backend) as the
// "admin" part of a handover offer: the successor keeps what the operator set.
#pragma once

#include "lib/admin/admin_board.hh"
#include "lib/handover/offer.hh"

namespace ferry::lifecycle {

// Every backend whose steering differs from the config's.
void describe_admin(const admin::AdminBoard& board, handover::OfferPart& part);
// Sets them on `board` (already configured for the running config's services).
void take_admin(admin::AdminBoard& board, const handover::OfferPart& part);

}  // namespace ferry::lifecycle
