#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "gates/layer_scan.h"

namespace kiln {

/// The layer scans of images kiln read before, by what was read and how: an image whose
/// digest did not change is not read again (a 93 MB final image took 7-8 s to scan on every
/// run). Kept under `<records>/scans/`, one small JSON file per scan; a file that cannot be
/// read or written costs a scan, never a verdict.
class ScanCache {
public:
  explicit ScanCache(std::filesystem::path dir) : m_dir(std::move(dir)) {}

  /// The key of a scan of image `identity` (a digest, or buildah's image id) with `options`.
  static std::string key(const std::string& identity, const ScanOptions& options);

  std::optional<std::vector<ImageScan>> find(const std::string& key) const;
  /// Keep `scans` under `key`; the oldest files go once there are more than k_kept.
  void keep(const std::string& key, const std::vector<ImageScan>& scans) const;

  static constexpr std::size_t k_kept = 64;

private:
  std::filesystem::path m_dir;
};

} // namespace kiln
