#pragma once

#include "chain/chain.h"
#include "disk/guard.h"

namespace kiln {

/// The disk policy a chain's [disk] and [cache] settings describe.
DiskPolicy disk_policy(const Chain& chain);

} // namespace kiln
