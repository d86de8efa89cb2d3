#include "disk/levers.h"

#include "disk/buildah_store.h"
#include "disk/buildkit_store.h"
#include "engine/buildkit_engine.h"

namespace kiln {

std::unique_ptr<StoreLevers> make_store_levers(const Chain& chain) {
  if (chain.engine == "buildkit") {
    return std::make_unique<BuildkitStore>(resolve_buildkit_address(chain.buildkit_host));
  }
  return std::make_unique<BuildahStore>();
}

DiskPolicy disk_policy(const Chain& chain) {
  DiskPolicy policy;
  policy.path = chain.disk.path;
  policy.cache_root = chain.cache.root;
  policy.need_gb = chain.disk.need_gb;
  policy.guard_gb = chain.disk.guard_gb;
  policy.keep_slugs = static_cast<size_t>(chain.disk.keep_slugs);
  policy.buildkit_keep_gb = chain.disk.buildkit_keep_gb;
  policy.watch_interval = chain.disk.watch_interval;
  return policy;
}

} // namespace kiln
