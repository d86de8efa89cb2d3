#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "disk/buildah_output.h"
#include "disk/store.h"
#include "engine/buildah_layers.h"

namespace kiln {

/// Which dangling images no build can reuse, and why the others stay.
///
/// buildah's layer cache is every image whose history and layers a build's steps repeat, tagged
/// or not, and `--filter dangling=true` lists some of them: an image with no layer (`FROM
/// scratch` + `ARG`) has no layer that links it to what was built on it, so buildah counts it
/// childless. Removing that one made the next build miss from step 2. An image is reused when
/// its history and layers begin another image's that a build still wants: a tagged one, or any
/// younger than the minimum age (a build running or just failed, whose retry starts from its
/// steps).
///
/// `buildah rmi` also removes each parent the removal leaves dangling, and for a layerless
/// parent that is again blind to what builds on it; a layerless image frees nothing anyway, so
/// none is ever removed.
struct StaleImages {
  std::vector<std::string> stale; // ids, in listing order
  uint64_t stale_bytes = 0;       // as listed
  std::set<std::string> kept;     // dangling ids that stay, for whatever reason below
  int reused = 0;                 // in the history of a tagged or recent image
  int young = 0;                  // younger than the minimum age
  int layerless = 0;
  int unreadable = 0; // config not readable: kept, since nothing is known of it
  std::vector<std::string> errors;
};

/// Sort the dangling images of `images` (ids in `dangling`); `steps` reads an image's config,
/// or says why it cannot. `now` and `min_age` decide which images are recent.
StaleImages find_stale_images(
    const std::vector<BuildahImage>& images, const std::set<std::string>& dangling,
    const std::function<tl::expected<BuildahImageSteps, std::string>(const std::string&)>& steps,
    int64_t now, std::chrono::seconds min_age);

/// Each layer's uncompressed size once, under the strongest kind of image holding it (`kinds`,
/// strongest first; `kind_of` gives an image id its kind): a layer a tagged image shares with
/// dangling ones is the tagged image's. So what a kind adds up to is what removing only its
/// images could free, where adding the images' own sizes counted every shared layer again (a
/// store `du` put at 181 MB added up to 4.8 GB). A layer no image holds (a working container's)
/// counts as `no image`.
struct LayerShare {
  uint64_t bytes = 0;
  int layers = 0;
};
std::map<std::string, LayerShare> layer_bytes_by_kind(
    const std::vector<StoreIndexEntry>& images, const std::vector<StoreIndexEntry>& layers,
    const std::map<std::string, std::string>& kind_of, const std::vector<std::string>& kinds);

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
  /// An image younger than this is a recent build's step: it stays, and so does every image it
  /// builds on. A `--layers` build commits each step as an untagged image and only then starts
  /// the next step's container from it; in between, that image looks dangling, and removing it
  /// would fail the running build.
  std::chrono::seconds min_dangling_age{std::chrono::minutes(10)};
};

/// buildah's store through the `buildah` CLI. Its layer lever removes the dangling images no
/// build can reuse (find_stale_images), one batch of ids at a time and without force, so an
/// image a container uses stays. The cache-mount folders are never touched, and their survival
/// is checked after every prune.
class BuildahStore : public StoreLevers {
public:
  explicit BuildahStore(BuildahStoreOptions options = {}) : m_options(std::move(options)) {}

  std::string engine() const override { return "buildah"; }

  /// `buildah info`'s store root.
  tl::expected<StoreLocation, std::string> location() const override;

  /// Types: `image` (tagged), `dangling` (what prune_layers removes: no build can reuse it),
  /// `intermediate` (untagged layer cache that stays), `no image` (layers of working
  /// containers) and `cache-mount` (the cache folders; records = mounts). Image bytes are layer
  /// bytes, each layer once (layer_bytes_by_kind); reclaimable_bytes is what only `dangling`
  /// images hold. total_bytes is the store root as `du -x` measures it, plus the cache folders.
  tl::expected<StoreUsage, std::string> usage() const override;

  /// buildah has no size-bounded prune: keep_gb cannot be applied, and need not be, since the
  /// layer cache a build reuses is never removed.
  LayerPrune prune_layers(double keep_gb) const override;

  /// The ids prune_layers would remove.
  std::vector<std::string> stale_images() const override;
  /// Every `name:tag` an image carries.
  std::vector<std::string> tagged_images() const override;
  /// `buildah rmi <reference>`, without force: an image a container uses stays. A layerless
  /// image is refused (it frees nothing, and buildah would take its layerless parents along).
  tl::expected<void, std::string> remove_image(const std::string& reference) const override;

private:
  struct Listing {
    std::vector<BuildahImage> images;
    std::set<std::string> dangling;
  };
  std::vector<std::string> command(std::initializer_list<std::string> args) const;
  tl::expected<Listing, std::string>
  list(const std::function<void(const std::vector<std::string>&)>& ran = nullptr) const;
  StaleImages
  stale(const Listing& listing,
        const std::function<void(const std::vector<std::string>&)>& ran = nullptr) const;
  /// `buildah info` of this store (its flags), asked once: `kiln disk status` locates the store
  /// and then sorts its images, and each of those needs it.
  tl::expected<BuildahStorePlace, std::string>
  place(const std::function<void(const std::vector<std::string>&)>& ran = nullptr) const;
  /// The image's steps, from its config in place when `place` holds it, else `buildah inspect`.
  tl::expected<BuildahImageSteps, std::string>
  steps(const std::string& reference, const std::optional<BuildahStorePlace>& place,
        const std::function<void(const std::vector<std::string>&)>& ran = nullptr) const;

  BuildahStoreOptions m_options;
  mutable std::mutex m_place_mutex;
  mutable std::optional<BuildahStorePlace> m_place;
};

} // namespace kiln
