#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "engine/image_config.h"
#include "gates/residue.h"
#include "gates/sbom.h"

namespace kiln {

/// What one pass over an image's layers looks for.
struct ScanOptions {
  bool residue = true;
  std::vector<ResidueAllow> allow;
  /// Absolute paths that must exist in the image as built (symlinks followed).
  std::vector<std::string> artifacts;
  /// Judge every ELF file against the platform of the image's config (the arch gate), with
  /// these exceptions (a glob and the chain's reason, as residue's).
  bool arch = false;
  std::vector<ResidueAllow> arch_allow;
  /// Read the package databases the image's files hold, for its SBOM.
  bool sbom = false;
};

/// An ELF file in an image that is not built for the image's platform.
struct ForeignBinary {
  std::string path;        // absolute in the image
  std::string description; // `elf_description` of it
  std::size_t layer = 0;   // the layer that added it, 1-based from the bottom
  std::string allowed;     // the arch_allow reason, when an entry matched
};

/// What the pass found in one image (one platform).
struct ImageScan {
  std::string platform; // `os/arch[/variant]` from its config
  std::size_t layers = 0;
  std::vector<ResidueFinding> residue; // allowed ones too, each with its reason
  std::vector<std::string> missing;    // artifacts the image does not have
  /// With `arch`: the ELF files of the final tree not built for `platform` (allowed ones too),
  /// and whether kiln knows what that platform's ELF files look like.
  std::vector<ForeignBinary> foreign;
  bool arch_judged = false;
  std::size_t elf_files = 0; // ELF files looked at
  /// With `sbom`: the packages the final tree's databases list, and its os-release.
  std::vector<Package> packages;
  OsRelease os;
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
