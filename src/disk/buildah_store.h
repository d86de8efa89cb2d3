#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disk/store.h"

namespace kiln {

/// One image of `buildah images --all --json --no-trunc` (buildah 1.28.2 prints `id` as
/// `sha256:<hex>`, `names` as null or a list, `size` as text such as `2.13 MB`).
struct BuildahImage {
  std::string id; // the bare 64-hex id, the `sha256:` prefix taken off
  std::vector<std::string> names;
  /// The image's whole size as buildah lists it (3 significant digits). It counts every parent
  /// layer, which images share, so a sum over images overstates the disk they use.
  uint64_t bytes = 0;
  int64_t created = 0; // Unix seconds
  bool read_only = false;
};

/// Parse `buildah images --json` output; an error when it is not the JSON list buildah prints.
tl::expected<std::vector<BuildahImage>, std::string> parse_buildah_images(std::string_view text);

/// Where buildah keeps RUN --mount=type=cache directories, outside its image store, one
/// subfolder per cache id (or per target when the mount names no id): `$TMPDIR` (else
/// /var/tmp) + `/buildah-cache` up to buildah 1.28, + `/buildah-cache-<uid>` from 1.29 on. Both
/// are returned; the levers never write to either, they only count what is there.
std::vector<std::filesystem::path> buildah_cache_dirs();

/// What the cache-mount folders hold: one mount per subfolder.
struct CacheDirCount {
  int mounts = 0;
  uint64_t files = 0;
  uint64_t bytes = 0;
};
CacheDirCount count_cache_dirs(const std::vector<std::filesystem::path>& dirs);

struct BuildahStoreOptions {
  /// Put right after `buildah` in every command, e.g. `--root R --runroot RR` for a private
  /// store (the tests use one, so a prune never reaches another run's images).
  std::vector<std::string> global_flags;
  /// A dangling image younger than this stays. A `--layers` build commits each step as an
  /// untagged image and only then starts the next step's container from it; in between, that
  /// image looks dangling, and removing it would fail the running build.
  std::chrono::seconds min_dangling_age{std::chrono::minutes(10)};
};

/// buildah's store through the `buildah` CLI. Its layer lever removes dangling images only
/// (untagged, nothing built on them; their parents go too once nothing else uses them), one id
/// at a time and without force, so an image a container uses stays. The cache-mount folders
/// are never touched, and their survival is checked after every prune.
class BuildahStore : public StoreLevers {
public:
  explicit BuildahStore(BuildahStoreOptions options = {}) : m_options(std::move(options)) {}

  std::string engine() const override { return "buildah"; }

  /// Types: `image` (tagged), `dangling` (what prune_layers frees), `intermediate` (untagged
  /// layer cache under another image) and `cache-mount` (the cache folders; records = mounts).
  /// reclaimable_bytes is the dangling images' listed size.
  tl::expected<StoreUsage, std::string> usage() const override;

  /// buildah has no size-bounded prune: keep_gb cannot be applied, and need not be, since the
  /// layer cache a build reuses (the intermediate images under tagged ones) is never removed.
  LayerPrune prune_layers(double keep_gb) const override;

  /// Bare ids of `buildah images --filter dangling=true`.
  std::vector<std::string> dangling_images() const override;
  /// Every `name:tag` an image carries.
  std::vector<std::string> tagged_images() const override;
  /// `buildah rmi <reference>`, without force: an image a container uses stays.
  bool remove_image(const std::string& reference) const override;

private:
  std::vector<std::string> command(std::initializer_list<std::string> args) const;

  BuildahStoreOptions m_options;
};

} // namespace kiln
