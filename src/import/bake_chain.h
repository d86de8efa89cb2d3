// Turns a bake file's targets into a chain file: one [[stage]] per target, its `target:`
// contexts as needs, its platforms as [[lane]] tables. What kiln has no place for is listed,
// never silently lost. docs/import-bake.md gives the whole mapping.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <tl/expected.hpp>

#include "import/bake_file.h"

namespace kiln {

struct BakeImport {
  std::filesystem::path bake_file; // absolute: paths in the bake file are relative to its folder
  std::filesystem::path chain_dir; // absolute: the written chain's folder, its paths' base
  std::string group = "default";   // the group whose targets are imported
  bool group_given = false;        // a group named on purpose must exist
  std::string chain_name;          // [chain] name
  /// The ARGs a Dockerfile declares (by absolute path), nullopt when it cannot be read: a
  /// build arg the Dockerfile does not declare is refused by kiln's loader, so it is dropped.
  std::function<std::optional<std::vector<std::string>>(const std::filesystem::path&)>
      declared_args;
  /// Whether a regular file exists (a secret's src): kiln's loader refuses a missing one.
  std::function<bool(const std::filesystem::path&)> is_file;
};

struct ImportedChain {
  std::string toml;                 // the chain file's text
  std::vector<std::string> dropped; // "target X: what (why)", each also in the file's header
};

/// The chain file of `bake`'s targets in `options.group`. An error (a group that is not
/// there, targets that need each other) means no chain can be written.
tl::expected<ImportedChain, std::string> bake_to_chain(const BakeFile& bake,
                                                       const BakeImport& options);

} // namespace kiln
