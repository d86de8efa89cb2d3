#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <tl/expected.hpp>

namespace kiln {

/// One image of `buildah images --all --json --no-trunc` (buildah 1.28.2 prints `id` as
/// `sha256:<hex>`, `names` as null or a list, `size` as text such as `2.13 MB`).
struct BuildahImage {
  std::string id; // the bare 64-hex id, the `sha256:` prefix taken off
  std::vector<std::string> names;
  /// The image's whole size as buildah lists it (3 significant digits). It counts every parent
  /// layer, which images share, so a sum over images overstates the disk they use.
  uint64_t bytes = 0;
  int64_t created = 0; // Unix seconds: the config's date (`--timestamp` sets it), not the store's
  bool read_only = false;
};

/// Parse `buildah images --json` output; an error when it is not the JSON list buildah prints.
tl::expected<std::vector<BuildahImage>, std::string> parse_buildah_images(std::string_view text);

/// What of an image's config says which build steps it holds: its history entries and its
/// layers. Each entry is kept as compact JSON of the fields buildah's layer cache compares
/// (created_by, comment, author, empty_layer; not the date), so a config read in place and one
/// `buildah inspect` printed compare equal.
struct BuildahImageSteps {
  std::vector<std::string> history;
  std::vector<std::string> diff_ids;
};

/// The steps in `buildah inspect --type image` output (its `OCIv1` config).
tl::expected<BuildahImageSteps, std::string> parse_buildah_inspect(std::string_view text);
/// The steps in an image config blob (buildah_config_blob).
tl::expected<BuildahImageSteps, std::string> parse_config_steps(std::string_view text);

/// The bare ids of `buildah images --quiet --no-trunc` lines (`sha256:` taken off); lines that
/// are not an id (a warning) are passed over.
std::set<std::string> parse_buildah_ids(std::string_view text);

/// The ids `buildah rmi` printed as removed (the images asked for, and the parents it took with
/// them), with the errors it printed, those about an image in use set apart.
struct BuildahRemoval {
  std::vector<std::string> removed;
  int in_use = 0;
  std::vector<std::string> errors;
};
void read_buildah_removal(std::string_view output, BuildahRemoval& removal);

} // namespace kiln
