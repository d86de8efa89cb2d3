#pragma once

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

/// Whether `name` already names the image `identity` (an image id, with or without `sha256:`)
/// in buildah's store, read from the store's index (no buildah process); false when unsure.
bool buildah_store_names(const std::string& name, const std::string& identity);

} // namespace kiln
