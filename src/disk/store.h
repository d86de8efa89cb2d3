#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// What an engine's store holds, by record type (BuildKit: `regular`, `exec.cachemount`,
/// `source.local`, ...; buildah: `image`, `dangling`).
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
};

/// One engine's disk levers. None of them may ever delete a compile-cache mount: a prune
/// without a filter once threw away 4.9 GB of compile cache to reclaim regenerable layers, and
/// the next build compiled everything cold.
class StoreLevers {
public:
  virtual ~StoreLevers() = default;

  virtual std::string engine() const = 0;

  virtual tl::expected<StoreUsage, std::string> usage() const = 0;

  /// Free regenerable layer cache while keeping `keep_gb` of it, filtered so cache mounts
  /// survive, and check afterwards that they did. Safe while a build runs.
  virtual LayerPrune prune_layers(double keep_gb) const = 0;

  /// Image references (ids for dangling ones). Removing images is safe only between stages:
  /// an image prune once took a blob out from under a running build.
  virtual std::vector<std::string> dangling_images() const = 0;
  virtual std::vector<std::string> tagged_images() const = 0;
  virtual bool remove_image(const std::string& reference) const = 0;
};

} // namespace kiln
