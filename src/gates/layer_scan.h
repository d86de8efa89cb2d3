#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "engine/image_config.h"
#include "gates/residue.h"

namespace kiln {

/// What one pass over an image's layers looks for.
struct ScanOptions {
  bool residue = true;
  std::vector<ResidueAllow> allow;
  /// Absolute paths that must exist in the image as built (symlinks followed).
  std::vector<std::string> artifacts;
};

/// What the pass found in one image (one platform).
struct ImageScan {
  std::string platform; // `os/arch[/variant]` from its config
  std::size_t layers = 0;
  std::vector<ResidueFinding> residue; // allowed ones too, each with its reason
  std::vector<std::string> missing;    // artifacts the image does not have
  /// How many findings refuse the image: residue that no allow-list entry covers.
  std::size_t refused() const;
};

/// Reads every layer of `image` once, the layers on as many threads as the machine has cores
/// (decompression is the cost), then replays them in order: a whiteout in layer 5 marks a file
/// of layer 3 deleted (still published), and the artifacts are looked up in the tree the
/// layers make together.
tl::expected<ImageScan, std::string> scan_image(const LayoutImage& image,
                                                const ScanOptions& options);

/// scan_image for every image an OCI layout holds (each platform of an index; only the one
/// `digest` names when given); findings name their platform when there is more than one.
tl::expected<std::vector<ImageScan>, std::string> scan_layout(const std::filesystem::path& layout,
                                                              const ScanOptions& options,
                                                              const std::string& digest = {});

} // namespace kiln
