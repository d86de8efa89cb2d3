#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chain/chain.h"
#include "disk/store.h"

namespace kiln {

/// One store the chain's stages build into: buildah's, or one BuildKit daemon's. Every lever
/// that acts on a store (du, prune, the floors, the watchdog) acts on the store of the daemon a
/// stage builds on, and its lines name that daemon.
struct StoreSite {
  std::string address; // the daemon a build's host names; "" buildah's store, buildctl's default
  const StoreLevers* levers = nullptr;
  /// The filesystem whose free space the floors and the watchdog measure for this store:
  /// `[disk] path` when set, else where the store keeps its data. "" when that cannot be known
  /// from this host (a remote daemon): `disk_unknown` says why.
  std::filesystem::path disk;
  std::string disk_unknown;
  std::shared_ptr<StoreLevers> owned;
};

/// A filesystem kiln measures, with the levers that free space on it.
struct MeasuredDisk {
  std::filesystem::path path;
  const StoreLevers* levers = nullptr; // nullptr: the cache exports' own only
};

/// The stores a chain builds into, each once, in the chain file's order: buildah's one store;
/// for BuildKit each worker's daemon, each lane's own host, and the chain's default daemon, each
/// when a stage builds on it. A daemon on another host (tcp://) is not measured from here.
class StoreSites {
public:
  /// The stores `stages` build into (a run's); `seam` (tests): the levers of every site.
  StoreSites(const Chain& chain, const std::vector<const Stage*>& stages,
             const StoreLevers* seam = nullptr);
  /// The stores every stage of the chain builds into.
  explicit StoreSites(const Chain& chain, const StoreLevers* seam = nullptr);

  /// The store a build whose request names `host` writes into ("": the chain's default).
  const StoreSite& at(const std::string& host) const;
  const std::vector<StoreSite>& all() const { return m_sites; }
  /// One site per filesystem the stores are measured on, the one whose data is there when
  /// several share it.
  std::vector<const StoreSite*> one_per_disk() const;
  /// What a preflight, a watchdog or a reclaim measures, each filesystem once: one_per_disk()'s,
  /// then `cache_root` when no store is measured on its filesystem (a remote daemon's chain
  /// writes its exports to this host), with no store levers.
  std::vector<MeasuredDisk> measured_disks(const std::filesystem::path& cache_root) const;

private:
  static std::vector<const Stage*> all_stages(const Chain& chain);

  std::vector<StoreSite> m_sites;
  std::string m_default; // the address a build with no host of its own goes to
};

} // namespace kiln
