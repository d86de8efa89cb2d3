#include "disk/policy.h"

namespace kiln {

DiskPolicy disk_policy(const Chain& chain) {
  DiskPolicy policy;
  policy.path = chain.disk.path;
  policy.cache_root = chain.cache.root;
  policy.need_gb = chain.disk.need_gb;
  policy.guard_gb = chain.disk.guard_gb;
  policy.keep_slugs = static_cast<size_t>(chain.disk.keep_slugs);
  policy.exports_max_gb = chain.disk.exports_max_gb.value_or(0);
  policy.buildkit_keep_gb = chain.disk.buildkit_keep_gb;
  policy.watch_interval = chain.disk.watch_interval;
  return policy;
}

} // namespace kiln
