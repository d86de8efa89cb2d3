#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

#include "engine/image_config.h"

namespace kiln {

/// Whether `text` is buildah's id of an image: its config's digest, the 64 lowercase hex digits
/// without `sha256:`.
bool is_image_id(std::string_view text);
/// `id` without a leading `sha256:`.
std::string bare_image_id(std::string_view id);

/// Where buildah keeps its store, as `buildah info` names it.
struct BuildahStorePlace {
  std::filesystem::path root; // store.GraphRoot
  std::string driver;         // store.GraphDriverName
};

/// Parse `buildah info` output (warnings printed before the JSON are passed over).
tl::expected<BuildahStorePlace, std::string> parse_buildah_info(std::string_view text);

/// What kiln reads of one entry of the store's images index (`<driver>-images/images.json`) or
/// layers index (`<driver>-layers/layers.json`); a key that is absent or not a string is "".
struct StoreIndexEntry {
  std::string id;
  std::vector<std::string> names; // an image's names
  std::string layer;              // an image's top layer
  std::string parent;             // a layer's parent
  std::string diff_digest;        // a layer's uncompressed digest
  uint64_t diff_size = 0;         // a layer's uncompressed size, 0 when not recorded
};

/// Parse one of the store's indexes (a JSON array of objects; entries that are not objects are
/// passed over). nullopt when `text` is not such an array.
std::optional<std::vector<StoreIndexEntry>> parse_store_index(std::string_view text);

/// The store's images index and layers index, each as parse_store_index reads it. A parse is
/// kept for as long as its file stays the same one.
struct StoreIndexes {
  std::shared_ptr<const std::vector<StoreIndexEntry>> images;
  std::shared_ptr<const std::vector<StoreIndexEntry>> layers;
};
tl::expected<StoreIndexes, std::string> read_store_indexes(const BuildahStorePlace& place);

/// The config blob of image `image_id` (with or without `sha256:`), read in place from the
/// store at `place`: the store keeps it under its digest, which is the image's id, and it is
/// returned only when its bytes have that digest, so what is read is that image's config.
/// nullopt when it is not there (another driver, another store, an id that is a name).
std::optional<std::string> buildah_config_blob(const BuildahStorePlace& place,
                                               const std::string& image_id);

/// The config of `image` (an id or a name): read in place when it is an id in the default
/// store (a file read instead of a `buildah inspect` of 0.2 s), else from `buildah inspect`.
ImageConfigRead buildah_image_config(const std::string& image);

/// An image of buildah's store with its layers where the store keeps them, read in place: the
/// gates read the image the store holds, never an exported copy (a 93 MB image once took 7 s to
/// export for every run, and an export that failed on a small disk refused a good image).
/// `image_id` is the store's id (the config's digest, with or without `sha256:`). Its layers
/// are checked against the config's `rootfs.diff_ids`, so what is read is that image. overlay
/// and vfs stores only; the error names any other driver.
tl::expected<LayoutImage, std::string> buildah_store_image(const std::string& image_id);

/// Ask where buildah keeps its store (a `buildah info`, 0.2 s) if that is not known yet; the
/// answer is kept for the rest of the process, for every function here.
void locate_buildah_store();

/// Whether `name` already names the image `identity` (an image id, with or without `sha256:`)
/// in buildah's store, read from the store's index (no buildah process); false when unsure.
bool buildah_store_names(const std::string& name, const std::string& identity);

} // namespace kiln
