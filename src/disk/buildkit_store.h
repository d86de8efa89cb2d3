#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disk/sizes.h"
#include "disk/store.h"
#include "engine/buildkit_engine.h"

namespace kiln {

/// One record of `buildctl du --verbose` (or of `buildctl prune --verbose`).
struct DuRecord {
  std::string id;
  std::string type; // as printed; "" when the record has no `Type:` line (see parse_du_verbose)
  uint64_t bytes = 0;
  bool reclaimable = false;
  bool shared = false;
  std::string description;
};

/// The record blocks of `buildctl du --verbose` (v0.11 prints `Key:\t\tvalue` lines, one blank
/// line after each record, then a `Reclaimable:`/`Total:` summary that is not a record). A
/// record without a `Type:` line keeps the type "": v0.11's `du` always prints one (its cache
/// manager reports an untyped record as `regular`), but `prune --verbose` prints none at all,
/// because the records its prune streams back carry no type.
std::vector<DuRecord> parse_du_verbose(std::string_view text);

/// The type BuildKit's prune filter sees: v0.11's cache manager treats an untyped record as
/// `regular` (cache/manager.go, in both DiskUsage and prune).
std::string effective_type(const DuRecord& record);

/// The `--keep-storage` value (MB) that keeps `keep_gb` GB of layer cache under
/// `--filter type==regular`. BuildKit compares --keep-storage with the size of the WHOLE store
/// (every record not shared, of every type) and only then applies the filter, so a bare keep of
/// 120000 against 196 GB of cache mounts deletes every idle layer. The records the filter cannot
/// free (every type but `regular`, not shared, since BuildKit leaves shared ones out of its sum)
/// are added, rounded up to whole MB. keep_gb 0 stays 0: reclaim every regenerable layer.
uint64_t regular_keep_mb(double keep_gb, const std::vector<DuRecord>& records);

/// What a store holds, from its `du --verbose` records, grouped by effective_type().
StoreUsage usage_from_records(const std::vector<DuRecord>& records);

/// BuildKit's store through `buildctl [--addr A]`: only ever a `type==regular` prune, so the
/// `exec.cachemount` records (ccache, sccache, apt, cargo) survive, checked after every prune.
class BuildkitStore : public StoreLevers {
public:
  explicit BuildkitStore(BuildkitAddress address)
      : m_address(address), m_engine(std::move(address)) {}

  std::string engine() const override { return "buildkit"; }
  std::string label() const override { return "buildkit store at " + m_address.shown(); }

  /// The root of the buildkitd on a local unix socket (locate_buildkitd); a remote daemon's
  /// cannot be known.
  tl::expected<StoreLocation, std::string> location() const override;

  tl::expected<StoreUsage, std::string> usage() const override;

  /// du (to size what the filter cannot free), count the cache mounts, prune, count again.
  /// A missing buildctl or an unreachable daemon skips it with one WARN line.
  LayerPrune prune_layers(double keep_gb) const override;

  /// BuildKit keeps no image store kiln could list: a stage's image is the OCI layout kiln
  /// writes (or a registry push), so these find nothing and remove nothing.
  std::vector<std::string> stale_images() const override { return {}; }
  std::vector<std::string> tagged_images() const override { return {}; }
  tl::expected<void, std::string> remove_image(const std::string& /*reference*/) const override {
    return tl::unexpected(std::string("BuildKit keeps no image store kiln removes images from"));
  }

  /// `buildctl [--addr A] prune --filter type==regular --keep-storage <keep_mb> --verbose`: the
  /// only place kiln builds a prune command.
  std::vector<std::string> prune_argv(uint64_t keep_mb) const;

private:
  BuildkitAddress m_address;
  BuildkitEngine m_engine;
};

} // namespace kiln
