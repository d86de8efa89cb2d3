#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// What an engine's store holds, by record type (BuildKit: `regular`, `exec.cachemount`,
/// `source.local`, ...; buildah: `image`, `dangling`, `intermediate`, `cache-mount`).
struct StoreUsage {
  std::map<std::string, uint64_t> bytes_by_type;
  std::map<std::string, int> records_by_type;
  uint64_t total_bytes = 0;
  uint64_t reclaimable_bytes = 0;
};

/// What one filtered prune of the engine store did.
struct LayerPrune {
  bool ran = false; // false: skipped, `skipped` says why
  std::string skipped;
  std::vector<std::string> commands; // every command it ran, as argv joined by spaces
  int cache_mounts_before = -1;      // compile-cache records before and after; -1: unknown
  int cache_mounts_after = -1;
  std::vector<std::string> lines; // what to log, one line each (prefix `[disk-store]`)
  /// What it removed, in one phrase for the reclaim's record ("removed 2 image(s) (ac0edaeb1d53,
  /// 88a6c790ebc3)", "pruned 14 layer record(s), 3.16MB"), so the console line that names the
  /// reclaim says what went without the detail lines of driver.log.
  std::string summary;
  bool removed_any = false;
};

/// Where a store keeps its data on this host: what a lever frees, it frees on this filesystem.
struct StoreLocation {
  std::filesystem::path path; // what to stat (for a daemon in a container, through /proc)
  std::string shown;          // how a log line names it
};

/// One engine's disk levers. None of them may ever delete a compile-cache mount: a prune
/// without a filter once threw away 4.9 GB of compile cache to reclaim regenerable layers, and
/// the next build compiled everything cold. Nor may they delete layer cache a build can reuse,
/// nor another chain's images: what they remove is what no build can reuse, and the tags they
/// are handed.
class StoreLevers {
public:
  virtual ~StoreLevers() = default;

  virtual std::string engine() const = 0;

  /// How a line names this store: its engine and, for a daemon, which one and where it was named.
  virtual std::string label() const { return engine() + " store"; }

  /// Where the store keeps its layers, or why that cannot be known. A lever acts only when
  /// this is on the filesystem short of space: removing images elsewhere frees nothing there.
  virtual tl::expected<StoreLocation, std::string> location() const = 0;

  virtual tl::expected<StoreUsage, std::string> usage() const = 0;

  /// Free regenerable layer cache while keeping `keep_gb` of it, filtered so cache mounts
  /// survive, and check afterwards that they did. Safe while a build runs.
  virtual LayerPrune prune_layers(double keep_gb) const = 0;

  /// Images no build can reuse (ids): what `prune_layers` removes, for a pass between stages.
  /// Removing images is safe only between stages: an image prune once took a blob out from
  /// under a running build.
  virtual std::vector<std::string> stale_images() const = 0;
  virtual std::vector<std::string> tagged_images() const = 0;
  /// Remove one image by id or name, or say why it was not removed.
  virtual tl::expected<void, std::string> remove_image(const std::string& reference) const = 0;
};

} // namespace kiln
