#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// What of an image's config says which build steps it holds: its history entries (each as
/// compact JSON, compared whole, as buildah's layer cache compares them) and its layers.
struct BuildahImageSteps {
  std::vector<std::string> history;
  std::vector<std::string> diff_ids;
};

/// The steps of each image read before, kept between kiln commands. An image's id is its
/// config's digest, so what was read of an id once stays true; without this, every `kiln disk
/// status` on a store of a thousand images ran a thousand `buildah inspect`s of 0.2 s each.
///
/// One file per image, replaced whole, so kiln commands running at once share the folder
/// safely. Every failure (no folder, a torn or foreign file) is a miss: the caller reads the
/// image again.
class ImageStepsCache {
public:
  /// `$XDG_CACHE_HOME/kiln/buildah-image-steps`, else under `$HOME/.cache`; empty when neither
  /// is set (no cache).
  static std::filesystem::path default_folder();

  explicit ImageStepsCache(std::filesystem::path folder) : m_folder(std::move(folder)) {}

  std::optional<BuildahImageSteps> find(const std::string& id) const;
  /// Best effort: a cache that cannot be written only means reading the image again next time.
  void keep(const std::string& id, const BuildahImageSteps& steps) const;
  /// Remove the entries written longer ago than `age`: the images of a store come and go, and
  /// an image still there is only read once more.
  void forget_older_than(std::chrono::hours age) const;

private:
  std::filesystem::path file(const std::string& id) const;

  std::filesystem::path m_folder;
};

} // namespace kiln
