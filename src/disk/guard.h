#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "disk/store.h"

namespace kiln {

/// Below this much retained layer cache the next stages recompiled what they should have
/// pulled from cache, so a non-zero keep is raised to it.
inline constexpr double k_min_buildkit_keep_gb = 100;

struct DiskPolicy {
  std::filesystem::path path;       // the filesystem whose free space is guarded
  std::filesystem::path cache_root; // where the slugs live; empty: none
  double need_gb = 0;               // 0: no preflight
  double guard_gb = 40;             // 0: no guard
  size_t keep_slugs = 3;
  double exports_max_gb = 0;     // the cache exports' total; 0: no cap
  double buildkit_keep_gb = 120; // 0: reclaim every regenerable layer
  // Milliseconds so tests can tick fast; seconds assign to it unchanged.
  std::chrono::milliseconds watch_interval{std::chrono::seconds(120)};
};

/// Why the levers of `store` cannot free space on the filesystem of `path`: its data is on
/// another one, or where it is cannot be known. "" when they can.
std::string store_elsewhere(const StoreLevers* store, const std::filesystem::path& path);

/// The keep a store prune uses: `buildkit_keep_gb` raised to `k_min_buildkit_keep_gb` unless
/// it is 0. `note` (when given) receives the line saying so, or "" when nothing was raised.
double effective_keep_gb(const DiskPolicy& policy, std::string* note = nullptr);

/// Applies `effective_keep_gb` to `policy` and returns what to log about it.
std::vector<std::string> normalize_policy(DiskPolicy& policy);

struct GateResult {
  bool ok = true;
  std::string message; // why the run cannot go on, when !ok
  std::vector<std::string> lines;
};

/// Before anything runs: when `need_gb` does not fit, trim slugs up to the deficit (none is
/// protected, nothing has run yet) and refuse if it still does not fit.
GateResult preflight(const DiskPolicy& p);

/// Before a stage: when less than `floor_gb` is free, reclaim with every lever, images
/// included (no build runs between stages), and refuse if it is still short.
GateResult stage_floor(const DiskPolicy& p, const std::string& stage, double floor_gb,
                       const std::vector<std::string>& protected_slugs, const StoreLevers* store,
                       const std::vector<std::string>& removable_tags, bool images_allowed = true);

struct ReclaimOutcome {
  uint64_t trimmed = 0; // every amount is a free-space delta, not a size
  uint64_t store_freed = 0;
  uint64_t images_freed = 0;
  double free_before_gb = 0, free_after_gb = 0;
  bool removed_any = false;     // some lever removed something (whether or not space rose)
  bool store_prune_ran = false; // prune_layers was called: the episode's one prune is spent
  /// What each lever removed, or why it did not act, one phrase each: the record's tail.
  std::vector<std::string> parts;
  std::string record;             // the one `[disk-reclaim]` line
  std::vector<std::string> lines; // what each lever did or why it was skipped, before `record`
};

/// Free space until `target_free_bytes` are free on `p.path`, lever by lever, each skipped once
/// the target is met, and each only when its storage is on the filesystem of `p.path` (slugs:
/// the cache root; the store and images: StoreLevers::location): (1) trim slugs outside
/// `protected_slugs`; (2) the engine store's filtered prune, unless `store_already_pruned` (a
/// second prune walks the whole store again and frees nothing); (3) only when `images_allowed`
/// (between stages): the images no build can reuse, then `removable_tags`, measuring after each
/// removal and stopping at the target, since shared layers make an image's size say nothing
/// about what removing it frees. The record names what each lever removed. Never throws.
ReclaimOutcome reclaim(const DiskPolicy& p, const std::string& where, uint64_t target_free_bytes,
                       const std::vector<std::string>& protected_slugs, const StoreLevers* store,
                       bool store_already_pruned, bool images_allowed,
                       const std::vector<std::string>& removable_tags);

} // namespace kiln
