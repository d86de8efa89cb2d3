#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// The Env of an image's config (`NAME=value` entries), read from an OCI image layout folder:
/// index.json -> manifest -> config blob. `digest` picks the manifest index.json names (a layout
/// can hold several); empty takes the first. A nested index is followed to its first manifest.
tl::expected<std::vector<std::string>, std::string>
image_env_from_layout(const std::filesystem::path& layout, const std::string& digest = {});

/// The Env of an image in buildah's store (`buildah inspect --type image`).
tl::expected<std::vector<std::string>, std::string>
image_env_from_buildah(const std::string& image);

} // namespace kiln
