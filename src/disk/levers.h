#pragma once

#include <memory>

#include "chain/chain.h"
#include "disk/guard.h"
#include "disk/store.h"

namespace kiln {

/// The store levers of the engine a chain builds with.
std::unique_ptr<StoreLevers> make_store_levers(const Chain& chain);

/// The disk policy a chain's [disk] and [cache] settings describe.
DiskPolicy disk_policy(const Chain& chain);

} // namespace kiln
