#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// The most kiln reads of one JSON document about an image (an OCI index, manifest or config,
/// BuildKit's metadata file). They weigh kilobytes and registries refuse manifests over 4 MiB:
/// a larger file is a mistake or a trap (a link to /dev/zero), not an image.
constexpr uint64_t k_image_json_limit = 16 << 20;

/// Whether `digest` is `sha256:` and 64 lowercase hex digits, the only form kiln follows: it
/// becomes a path under blobs/, where anything else (`sha256:../../etc/hostname`) could lead
/// out of the layout.
bool is_oci_digest(std::string_view digest);

/// The Env of an image's config (`NAME=value` entries), read from an OCI image layout folder:
/// index.json -> manifest -> config blob. `digest` picks the manifest index.json names (a layout
/// can hold several); empty takes the first. A nested index is followed to its first manifest.
/// Each file must be a regular file of at most k_image_json_limit bytes, named by a digest
/// is_oci_digest accepts.
tl::expected<std::vector<std::string>, std::string>
image_env_from_layout(const std::filesystem::path& layout, const std::string& digest = {});

/// The Env of an image in buildah's store (`buildah inspect --type image`).
tl::expected<std::vector<std::string>, std::string>
image_env_from_buildah(const std::string& image);

} // namespace kiln
