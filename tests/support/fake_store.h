#pragma once

#include <atomic>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "disk/store.h"

namespace kiln::testing {

/// A stand-in for an engine's disk levers that remembers what is asked of it. Without a folder
/// it frees nothing and its store is at `m_location` (/proc unless set; nowhere known when
/// `m_location_error` is set). With `files(dir)` its store is files in `dir`: an image is a file
/// (a hard link shares its layer, so removing it frees nothing) and the layer cache one file,
/// `layers`, that the first prune deletes and later prunes find gone.
class FakeStore : public StoreLevers {
public:
  FakeStore() = default;
  /// A store kept as files in `dir`.
  static FakeStore files(std::filesystem::path dir);
  FakeStore(const FakeStore& other);

  std::string engine() const override { return "fake"; }
  tl::expected<StoreLocation, std::string> location() const override;
  tl::expected<StoreUsage, std::string> usage() const override { return StoreUsage{}; }
  LayerPrune prune_layers(double keep_gb) const override;
  std::vector<std::string> stale_images() const override { return m_stale; }
  std::vector<std::string> tagged_images() const override { return m_tagged; }
  tl::expected<void, std::string> remove_image(const std::string& reference) const override;

  /// What remove_image was asked to remove, in order.
  std::vector<std::string> removed() const;

  std::filesystem::path m_dir; // empty: a store of nothing
  std::filesystem::path m_location = "/proc";
  std::string m_location_error;
  std::vector<std::string> m_stale;
  std::vector<std::string> m_tagged;
  bool m_throw = false; // a prune that throws
  mutable std::atomic<int> m_located{0};
  mutable std::atomic<int> m_prunes{0};
  mutable std::atomic<double> m_last_keep{-1};

private:
  mutable std::mutex m_mutex;
  mutable std::vector<std::string> m_removed;
};

/// How many of `lines` contain `needle`.
int count_containing(const std::vector<std::string>& lines, const std::string& needle);

/// `lines`, each ended by a newline: for a failure message.
std::string joined(const std::vector<std::string>& lines);

} // namespace kiln::testing
