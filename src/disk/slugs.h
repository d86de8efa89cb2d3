#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln {

/// Every "G" and "GiB" kiln prints, and every `*_gb` setting, is 2^30 bytes: the unit `df -h`
/// prints as G, so an operator can check a line against `df -h` without converting.
inline constexpr uint64_t k_gib = uint64_t{1} << 30;

/// G with the precision the size calls for: `164`, `23.4`, `1.25`, `0.500`, `0.000244`, `0`.
/// `round_up` rounds at that precision away from zero, for shortfalls: "short by 0.000G" would
/// read as "not short at all".
std::string gib_text(uint64_t bytes, bool round_up = false);
std::string gib_text(double gib, bool round_up = false);

/// True when both paths (or the nearest existing folders above them) live on one filesystem.
/// Freeing space under one path only helps the other when this holds.
bool same_filesystem(const std::filesystem::path& a, const std::filesystem::path& b);

/// One local cache export: a folder per stage and lane under the cache root (BuildKit writes
/// `index.json`, `ingest/` and `blobs/` into it).
struct Slug {
  std::filesystem::path path;
  std::string name;
  uint64_t bytes = 0; // regular files, as tree_size counts them
  std::filesystem::file_time_type mtime;
};

/// Every directory directly under `root` (symlinks to directories are not slugs), oldest mtime
/// first, ties by name. The directory's own mtime dates the export: BuildKit rewrites
/// `index.json` on every export. A missing or unreadable root lists nothing.
std::vector<Slug> list_slugs(const std::filesystem::path& root);

struct TrimResult {
  int removed = 0;
  std::vector<std::string> names; // the slugs removed, oldest first
  size_t listed = 0;              // slugs under the root when the trim began
  uint64_t freed_bytes = 0;       // measured on `measure_path`
  std::vector<std::string> lines;
};

/// Remove the oldest slugs under `root` until `deficit_bytes` are freed on the filesystem of
/// `measure_path`, never one of the newest `keep_newest` nor one named in `protected_names`.
/// Free space is measured after each removal (the slug's size stands in when a measurement
/// fails), and the trim also stops once the removed slugs' own sizes cover the deficit: with
/// another process writing to the disk, or a filesystem that frees blocks late, measured
/// deltas stay small and would otherwise take every slug. Logs `[disk-trim]` lines, always
/// ending with a `removed N slug(s), freed X GiB; Y G free now` summary.
TrimResult trim_slugs(const std::filesystem::path& root, uint64_t deficit_bytes, size_t keep_newest,
                      const std::vector<std::string>& protected_names,
                      const std::filesystem::path& measure_path);

} // namespace kiln
