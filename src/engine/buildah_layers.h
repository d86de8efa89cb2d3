#pragma once

#include <map>
#include <string>

#include <tl/expected.hpp>

#include "engine/image_config.h"

namespace kiln {

/// An image of buildah's store with its layers where the store keeps them, read in place: the
/// gates read the image the store holds, never an exported copy (a 93 MB image once took 7 s to
/// export for every run, and an export that failed on a small disk refused a good image).
/// `image_id` is the store's id (the config's digest, with or without `sha256:`). Its layers
/// are checked against the config's `rootfs.diff_ids`, so what is read is that image. overlay
/// and vfs stores only; the error names any other driver.
tl::expected<LayoutImage, std::string> buildah_store_image(const std::string& image_id);

/// Every name in buildah's store and the id of the image it names, read from the store's index
/// (no buildah process per name).
tl::expected<std::map<std::string, std::string>, std::string> buildah_store_names();

} // namespace kiln
